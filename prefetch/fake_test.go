package prefetch

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// patternByte is the content of every fake object: a function of the key
// and offset, so a byte served from the wrong place or object shows.
func patternByte(seed uint32, off int64) byte {
	return byte(int64(seed) + off + 3*(off>>8) + 5*(off>>16) + 7*(off>>24))
}

func seedOf(key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()
}

func fakeObject(key string, size int64) store.Object {
	return store.Object{Key: key, Size: size, ETag: `"v1"`}
}

func fillPattern(p []byte, obj store.Object, off int64) {
	seed := seedOf(obj.Key)
	for i := range p {
		p[i] = patternByte(seed, off+int64(i))
	}
}

// wantBytes is what a read of obj at off into n bytes must return.
func wantBytes(obj store.Object, off int64, n int) []byte {
	b := make([]byte, max(min(off+int64(n), obj.Size)-off, 0))
	fillPattern(b, obj, off)
	return b
}

// fakeFetcher serves pattern objects of any size. It counts GETs and the
// bytes asked for, tracks the most bytes in flight at once, and can hold
// GETs until released or fail them.
type fakeFetcher struct {
	gets       atomic.Int64
	askedBytes atomic.Int64 // sum of len(p) over GETs
	maxAsk     atomic.Int64 // the largest len(p) of one GET
	cancelled  atomic.Int64 // GETs that returned because their ctx ended

	// hold, when set, makes each GET take a token before answering, or
	// give up when its ctx ends.
	hold chan struct{}
	// holdIf, when set, limits hold to the GETs it accepts.
	holdIf func(obj store.Object, off int64) bool
	// started, when set, receives the object key and offset of each GET.
	started chan string
	// fail, when set, may fail a GET.
	fail func(obj store.Object, off int64) error
	// report, when set, makes each GET fill its buffer in pieces of that
	// many bytes and report each to the Progress in its ctx, as the S3
	// backend does.
	report int

	mu          sync.Mutex
	inFlight    int64
	maxInFlight int64
	active      int
	byKeyOff    map[string]int   // GETs per "key@off"
	askedAt     map[string]int64 // bytes the last GET at "key@off" asked for
}

func (f *fakeFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	f.gets.Add(1)
	f.askedBytes.Add(int64(len(p)))
	for ask := f.maxAsk.Load(); int64(len(p)) > ask && !f.maxAsk.CompareAndSwap(ask, int64(len(p))); {
		ask = f.maxAsk.Load()
	}
	f.mu.Lock()
	f.inFlight += int64(len(p))
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.active++
	if f.byKeyOff == nil {
		f.byKeyOff, f.askedAt = map[string]int{}, map[string]int64{}
	}
	at := fmt.Sprintf("%s@%d", obj.Key, off)
	f.byKeyOff[at]++
	f.askedAt[at] = int64(len(p))
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight -= int64(len(p))
		f.active--
		f.mu.Unlock()
	}()

	if f.started != nil {
		f.started <- fmt.Sprintf("%s@%d", obj.Key, off)
	}
	if f.hold != nil && (f.holdIf == nil || f.holdIf(obj, off)) {
		select {
		case <-f.hold:
		case <-ctx.Done():
			f.cancelled.Add(1)
			return 0, ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		f.cancelled.Add(1)
		return 0, err
	}
	if f.fail != nil {
		if err := f.fail(obj, off); err != nil {
			return 0, err
		}
	}
	if off < 0 || off > obj.Size {
		return 0, store.ErrInvalidRange
	}
	n := int(max(min(int64(len(p)), obj.Size-off), 0))
	if f.report > 0 {
		for done := 0; done < n; {
			next := min(done+f.report, n)
			fillPattern(p[done:next], obj, off+int64(done))
			store.ReportProgress(ctx, next)
			done = next
		}
	} else {
		fillPattern(p[:n], obj, off)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *fakeFetcher) getsAt(key string, off int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byKeyOff[fmt.Sprintf("%s@%d", key, off)]
}

// askedAtOff is what the last GET of key at off asked for; 0: none.
func (f *fakeFetcher) askedAtOff(key string, off int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.askedAt[fmt.Sprintf("%s@%d", key, off)]
}

func (f *fakeFetcher) peak() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight
}

func (f *fakeFetcher) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

// emptyCache is a Cache that holds nothing and keeps nothing, as a
// cache.Cache with no tier does: every read of it misses, its Room is 0 (a
// random read of any object is one of an object larger than the cache,
// exact.go), and fetched ranges are still handed to Keep. Every test cache
// embeds it and overrides what it does.
type emptyCache struct{}

var (
	_ Cache = emptyCache{}
	_ Cache = (*cache.Cache)(nil)
)

func (emptyCache) Keep(store.Object, int64, []byte, cache.Sums, cache.Placement, bool) bool {
	return false
}
func (emptyCache) Summer(int64) *cache.Summer               { return nil }
func (emptyCache) Lookup(store.Object, int64) cache.Tier    { return cache.NotCached }
func (emptyCache) ReadRAM(store.Object, []byte, int64) bool { return false }
func (emptyCache) Room() int64                              { return 0 }
func (emptyCache) RAMFree() int64                           { return 0 }
func (emptyCache) SharesRAM() bool                          { return false }
func (emptyCache) ReadingWhole(store.Object)                {}
func (emptyCache) ReadDone(store.Object, bool)              {}
func (emptyCache) Get(store.Object, int64, cache.Tier) ([]byte, cache.Tier, bool) {
	return nil, cache.NotCached, false
}
func (emptyCache) ReadAt(store.Object, []byte, int64, cache.Placement) (int, bool) {
	return 0, false
}
func (emptyCache) ReadChunks(store.Object, []byte, int64) (cache.Tier, bool) {
	return cache.NotCached, false
}

// recordingCache is an emptyCache that checks the contract of Keep on every
// range it receives and remembers which blocks it got. room is its Room:
// an object that fits in it is not read as one larger than the cache
// (exact.go).
type recordingCache struct {
	emptyCache
	t         *testing.T
	blockSize int64
	room      int64
	content   func(obj store.Object, off int64, n int) []byte // what obj holds

	mu     sync.Mutex
	blocks map[string]map[int64]bool // key → block offsets received
	bytes  int64
}

func newRecordingCache(t *testing.T, blockSize int64) *recordingCache {
	return &recordingCache{t: t, blockSize: blockSize, content: wantBytes, blocks: map[string]map[int64]bool{}}
}

func (r *recordingCache) Keep(obj store.Object, index int64, data []byte, _ cache.Sums, _ cache.Placement, _ bool) bool {
	off := index * r.blockSize
	if int64(len(data))%r.blockSize != 0 && off+int64(len(data)) != obj.Size {
		r.t.Errorf("cache got %d bytes of %s at %d: not whole blocks and not the end", len(data), obj.Key, off)
	}
	if !bytes.Equal(data, r.content(obj, off, len(data))) {
		r.t.Errorf("cache got wrong bytes for %s at %d", obj.Key, off)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocks[obj.Key] == nil {
		r.blocks[obj.Key] = map[int64]bool{}
	}
	for b := off; b < off+int64(len(data)); b += r.blockSize {
		r.blocks[obj.Key][b] = true
	}
	r.bytes += int64(len(data))
	return false
}

func (r *recordingCache) Room() int64 { return r.room }

func (r *recordingCache) total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

func (r *recordingCache) has(key string, off int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blocks[key][off]
}

// readAll reads obj through st in chunks of n bytes and fails the test on
// any wrong byte or error.
func readAll(ctx context.Context, t *testing.T, st *Stream, obj store.Object, n int) {
	t.Helper()
	buf := make([]byte, n)
	for off := int64(0); off < obj.Size; off += int64(n) {
		if err := readCheck(ctx, st, obj, buf, off); err != nil {
			t.Error(err)
			return
		}
	}
}

// readCheck reads len(buf) bytes at off and compares them with the object.
func readCheck(ctx context.Context, st *Stream, obj store.Object, buf []byte, off int64) error {
	got, err := st.ReadAt(ctx, buf, off)
	want := wantBytes(obj, off, len(buf))
	if got != len(want) {
		return fmt.Errorf("read %s at %d: %d bytes, want %d (err %v)", obj.Key, off, got, len(want), err)
	}
	if len(want) < len(buf) && err != io.EOF {
		return fmt.Errorf("read %s at %d: short read with err %v, want io.EOF", obj.Key, off, err)
	}
	if len(want) == len(buf) && err != nil {
		return fmt.Errorf("read %s at %d: %w", obj.Key, off, err)
	}
	if !bytes.Equal(buf[:got], want) {
		return fmt.Errorf("read %s at %d: wrong bytes", obj.Key, off)
	}
	return nil
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble,
// whose traceback headers name it ("goroutine 7 [select, synctest bubble
// 3]:"). Goroutines outside it (other tests', the runtime's) come and go on
// their own time and are left out.
func bubbleGoroutines(t *testing.T) int {
	t.Helper()
	bubbleOf := regexp.MustCompile(`^goroutine \d+ \[[^\n]*, synctest bubble (\d+)\b`)
	own := make([]byte, 256)
	m := bubbleOf.FindSubmatch(own[:runtime.Stack(own, false)])
	if m == nil {
		t.Fatalf("bubbleGoroutines called outside a synctest bubble: %s", own)
	}
	all := make([]byte, 1<<20)
	for {
		n := runtime.Stack(all, true)
		if n < len(all) {
			all = all[:n]
			break
		}
		all = make([]byte, 2*len(all))
	}
	count := 0
	for _, line := range bytes.Split(all, []byte("\n")) {
		if g := bubbleOf.FindSubmatch(line); g != nil && bytes.Equal(g[1], m[1]) {
			count++
		}
	}
	return count
}
