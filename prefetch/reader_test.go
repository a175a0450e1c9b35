package prefetch

import (
	"bytes"
	"context"
	"io"
	"maps"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/store"
)

// blockCache holds whole objects, in its RAM tier except for those in
// onDisk, and counts the blocks it hands out.
type blockCache struct {
	emptyCache
	data      map[string][]byte
	onDisk    map[string]bool
	blockSize int64

	mu     sync.Mutex
	reads  int
	wholes []string // keys ReadDone was told were read whole
	begun  []string // keys ReadingWhole was told of
	ended  []string // keys ReadDone was told were not read whole
}

func (c *blockCache) ReadingWhole(obj store.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.begun = append(c.begun, obj.Key)
}

func (c *blockCache) Lookup(obj store.Object, index int64) cache.Tier {
	d, ok := c.data[obj.Key]
	switch {
	case !ok || index*c.blockSize >= int64(len(d)):
		return cache.NotCached
	case c.onDisk[obj.Key]:
		return cache.InRing
	}
	return cache.InRAM
}

func (c *blockCache) Get(obj store.Object, index int64, from cache.Tier) ([]byte, cache.Tier, bool) {
	t := c.Lookup(obj, index) & from
	if t == cache.NotCached {
		return nil, t, false
	}
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	d := c.data[obj.Key]
	return d[index*c.blockSize : min((index+1)*c.blockSize, int64(len(d)))], t, true
}

func (c *blockCache) ReadAt(obj store.Object, p []byte, off int64, _ cache.Placement) (int, bool) {
	d, ok := c.data[obj.Key]
	if !ok || off >= int64(len(d)) {
		return 0, false
	}
	c.mu.Lock()
	c.reads += int((off+int64(len(p))-1)/c.blockSize - off/c.blockSize + 1)
	c.mu.Unlock()
	return copy(p, d[off:]), true
}

func readerConfig(bs int64) Config {
	cfg := DefaultConfig()
	cfg.BlockSize, cfg.PartSize, cfg.MaxPrefetch = bs, 4*bs, 16*bs
	cfg.Memory, cfg.ReorderWindow = 64*bs, 8*bs
	return cfg
}

func TestReaderReadsEachCachedBlockOnce(t *testing.T) {
	const bs = 1 << 20
	data := make([]byte, 3*bs+777)
	rand.New(rand.NewSource(1)).Read(data)
	obj := store.Object{Key: "k", Size: int64(len(data)), ETag: "e"}
	c := &blockCache{data: map[string][]byte{"k": data}, blockSize: bs}
	s := newTestEngine(t, readerConfig(bs), &fakeFetcher{}, c)
	r := s.OpenReader(obj, false, 0)
	defer r.Close()
	var got []byte
	for off := int64(0); off < obj.Size; off += 128 << 10 {
		p := make([]byte, 128<<10)
		n, tier, err := r.ReadAt(context.Background(), p, off)
		if err != nil && err != io.EOF {
			t.Fatalf("read at %d: %v", off, err)
		}
		if tier != metrics.TierCache {
			t.Fatalf("read at %d served by %s", off, tier)
		}
		got = append(got, p[:n]...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes read through the cache differ from the object")
	}
	if c.reads != 4 {
		t.Fatalf("cache read %d times for 4 blocks read in 128 KiB requests, want 4", c.reads)
	}
	// A read spanning two blocks goes to the cache directly, still correct.
	p := make([]byte, bs)
	if n, _, err := r.ReadAt(context.Background(), p, bs/2); err != nil || n != bs || !bytes.Equal(p, data[bs/2:bs/2+bs]) {
		t.Fatalf("spanning read = %d, %v", n, err)
	}
	// So is one that ends at the object's short last block.
	p = make([]byte, bs)
	if n, _, err := r.ReadAt(context.Background(), p, 3*bs-500); err != io.EOF || n != 1277 || !bytes.Equal(p[:n], data[3*bs-500:]) {
		t.Fatalf("read to the end = %d, %v", n, err)
	}
}

// TestHandleReadsServeRAMOnlyFromTheCache: for a handle that streams
// (its first read is at 0), blocks the cache has in RAM are served from
// there (and the stream hears of them), while blocks only on disk go to the
// stream, which reads them ahead from the ring; both are reported as the
// cache tier. A random handle reads ring blocks itself
// (TestSmallRandomReadsOfARingBlockReadItOnce).
func TestHandleReadsServeRAMOnlyFromTheCache(t *testing.T) {
	const bs = 4096
	data := make([]byte, 3*bs)
	rand.New(rand.NewSource(2)).Read(data)
	objects := map[string][]byte{"ram": data, "disk": data}
	c := &blockCache{data: objects, onDisk: map[string]bool{"disk": true}, blockSize: bs}
	f := &fakeFetcher{}
	s := newTestEngine(t, readerConfig(bs), f, c)
	lent := map[string]bool{}
	for _, key := range []string{"ram", "disk"} {
		r := s.OpenReader(store.Object{Key: key, Size: int64(len(data)), ETag: "e"}, false, 0)
		p := make([]byte, bs)
		got, tier, release, err := r.Read(context.Background(), p, 0)
		if err != nil || !bytes.Equal(got, data[:bs]) || tier != metrics.TierCache {
			t.Fatalf("%s: read = %d bytes, %s, %v, or wrong bytes", key, len(got), tier, err)
		}
		lent[key] = release != nil
		if release != nil {
			release()
		}
		r.Close()
	}
	if st := settledStats(t, s); st.ServedBytes != bs || st.CacheBytes == 0 || f.gets.Load() != 0 {
		t.Fatalf("stream served %d bytes, read %d from the cache, %d GETs; want the disk read alone (%d), from the ring, no GET", st.ServedBytes, st.CacheBytes, f.gets.Load(), bs)
	}
	if lent["ram"] || !lent["disk"] {
		t.Fatalf("lent parts: %v; want the disk read alone answered from a pinned part", lent)
	}
}

func TestOneShotReadsSpanningDiskBlocksComeFromTheCache(t *testing.T) {
	const bs = 1 << 20
	data := make([]byte, 9*bs+123)
	rand.New(rand.NewSource(2)).Read(data)
	obj := store.Object{Key: "k", Size: int64(len(data)), ETag: "e"}
	c := &blockCache{data: map[string][]byte{"k": data}, onDisk: map[string]bool{"k": true}, blockSize: bs}
	// No store: a read the cache declined would have nowhere to go.
	s := newTestEngine(t, readerConfig(bs), nil, c)
	for _, tc := range []struct{ off, n int64 }{{0, 8 * bs}, {bs / 2, 3 * bs}, {8 * bs, 2 * bs}} {
		r := s.OpenReader(obj, true, 0)
		p := make([]byte, tc.n)
		n, tier, err := r.ReadAt(context.Background(), p, tc.off)
		r.Close()
		if err != nil && err != io.EOF {
			t.Fatalf("read %d+%d: %v", tc.off, tc.n, err)
		}
		if tier != metrics.TierCache {
			t.Fatalf("read %d+%d served by %s", tc.off, tc.n, tier)
		}
		if want := data[tc.off:min(tc.off+tc.n, obj.Size)]; !bytes.Equal(p[:n], want) {
			t.Fatalf("read %d+%d: %d bytes differ from the object's %d", tc.off, tc.n, n, len(want))
		}
	}
}

func TestReadAtCopiesLentBytesIntoTheCallersBufferAndReleasesThem(t *testing.T) {
	cfg := smallConfig()
	s := newTestEngine(t, cfg, &fakeFetcher{}, nil)
	obj := fakeObject("k", 64<<10)
	r := s.OpenReader(obj, false, 0)
	p := make([]byte, 4)
	n, tier, err := r.ReadAt(t.Context(), p, 3)
	if err != nil || n != 4 || !bytes.Equal(p, wantBytes(obj, 3, 4)) || tier != metrics.TierNetwork {
		t.Fatalf("ReadAt = %d %q, %s, %v; want 4 bytes of the object from the network", n, p, tier, err)
	}
	r.Close()
	if st := s.Stats(); st.InUseBytes != 0 {
		t.Fatalf("%d bytes of budget held after the reader closed: the lent part was not released", st.InUseBytes)
	}
}

func (c *blockCache) Room() int64 { return 1 << 40 }

func (c *blockCache) ReadChunks(obj store.Object, p []byte, off int64) (cache.Tier, bool) {
	n, ok := c.ReadAt(obj, p, off, cache.ForRandomRead)
	return cache.InRAM, ok && n == len(p)
}

func (c *blockCache) RAMFree() int64 { return 1 << 40 }

func (c *blockCache) ReadDone(obj store.Object, whole bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if whole {
		c.wholes = append(c.wholes, obj.Key)
	} else {
		c.ended = append(c.ended, obj.Key)
	}
}

// TestReadWholeTellsTheCache: a handle that read its object from the first
// byte to the last, in order, tells the cache on Close, which may keep it
// as a whole-shard file; one that read half, or every byte but not in one
// run, does not, nor does a one-shot read of all of it.
func TestReadWholeTellsTheCache(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	c := &blockCache{data: map[string][]byte{}, blockSize: cfg.BlockSize}
	s := newTestEngine(t, cfg, &fakeFetcher{}, c)
	obj := fakeObject("shard", 40*cfg.BlockSize+100)
	read := func(offs ...int64) {
		r := s.OpenReader(obj, len(offs) == 0, 0)
		if len(offs) == 0 { // one-shot: one read of every byte
			offs = []int64{0}
		}
		defer r.Close()
		for _, off := range offs {
			buf := make([]byte, min(cfg.BlockSize, obj.Size-off))
			if r.oneShot {
				buf = make([]byte, obj.Size)
			}
			if n, _, err := r.ReadAt(ctx, buf, off); err != nil && err != io.EOF || !bytes.Equal(buf[:n], wantBytes(obj, off, len(buf))) {
				t.Fatalf("read at %d: %d bytes, %v", off, n, err)
			}
		}
	}
	var all, half, rest []int64
	for off := int64(0); off < obj.Size; off += cfg.BlockSize {
		all = append(all, off)
		if off < 20*cfg.BlockSize {
			half = append(half, off)
		} else {
			rest = append(rest, off)
		}
	}
	// Every byte, but the second half in two runs out of order, each a
	// seek past the reorder window.
	seeked := append(append(append([]int64{}, half...), rest[13:]...), rest[:13]...)
	read(all[:wholeFileAfter-1]...)
	if len(c.begun) != 0 || len(c.ended) != 0 {
		t.Fatalf("a read of the first %d blocks told the cache of a whole read begun %d times, ended %d times; want none", wholeFileAfter-1, len(c.begun), len(c.ended))
	}
	read(half...)
	read(seeked...)
	read()
	if len(c.wholes) != 0 {
		t.Fatalf("ReadDone told of %v read whole after half a read, a read of every byte in three runs and a one-shot read of all of it", c.wholes)
	}
	// The half read and the seeked one each began a whole read from the
	// first byte and ended it without one; the one-shot read began none.
	if len(c.begun) != 2 || len(c.ended) != 2 {
		t.Fatalf("half a read, a seeked read and a one-shot read told the cache of a whole read begun %d times and not finished %d times; want 2 and 2", len(c.begun), len(c.ended))
	}
	read(all...)
	if len(c.wholes) != 1 || c.wholes[0] != obj.Key {
		t.Fatalf("ReadDone told of %v read whole after a whole read, want [%s]", c.wholes, obj.Key)
	}
	if len(c.begun) != 3 || len(c.ended) != 2 {
		t.Fatalf("a whole read told the cache of a whole read begun %d times in all, not finished %d times; want 3 and 2", len(c.begun), len(c.ended))
	}
}

// gatedCache is a blockCache whose Keep of block gated waits for gate, and
// that records the blocks put when ReadDone is told of a whole read.
type gatedCache struct {
	*blockCache
	gated int64
	gate  chan struct{}

	pmu    sync.Mutex
	put    map[int64]bool
	atTell int // blocks put when ReadDone was told of a whole read
}

func (c *gatedCache) Keep(_ store.Object, index int64, data []byte, _ cache.Sums, _ cache.Placement, _ bool) bool {
	last := index + (int64(len(data))-1)/c.blockSize
	if index <= c.gated && c.gated <= last {
		<-c.gate
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	for i := index; i <= last; i++ {
		c.put[i] = true
	}
	return false
}

func (c *gatedCache) ReadDone(obj store.Object, whole bool) {
	c.pmu.Lock()
	c.atTell = len(c.put)
	c.pmu.Unlock()
	c.blockCache.ReadDone(obj, whole)
}

// A reader reads a part's last bytes before the part's GET has handed them
// to the cache. A handle that read its object whole tells the cache only
// once every block was handed over, so that the whole-shard file the cache
// makes of it finds them all; not at its Close, while the last Keep waits.
func TestReadWholeTellsTheCacheOnceItTookEveryBlock(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	obj := fakeObject("gated", 12*cfg.BlockSize)
	blocks := int(obj.Size / cfg.BlockSize)
	c := &gatedCache{blockCache: &blockCache{data: map[string][]byte{}, blockSize: cfg.BlockSize}, gated: int64(blocks - 1), gate: make(chan struct{}), put: map[int64]bool{}}
	s := newTestEngine(t, cfg, &fakeFetcher{}, c)
	var once sync.Once
	release := func() { once.Do(func() { close(c.gate) }) }
	defer release() // before the engine's Close, which waits for the Keep
	r := s.OpenReader(obj, false, 0)
	buf := make([]byte, cfg.BlockSize)
	for off := int64(0); off < obj.Size; off += cfg.BlockSize {
		if n, _, err := r.ReadAt(ctx, buf, off); (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], wantBytes(obj, off, len(buf))) {
			t.Fatalf("read at %d: %d bytes, %v", off, n, err)
		}
	}
	r.Close()
	c.mu.Lock()
	told := len(c.wholes)
	c.mu.Unlock()
	if told != 0 {
		t.Fatalf("ReadDone told of a whole read while the Keep of its last block waited")
	}
	release()
	settledStats(t, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.wholes) != 1 || c.atTell != blocks {
		t.Fatalf("after the last Keep: ReadDone told of %v read whole, with %d of %d blocks put; want [%s], every block put", c.wholes, c.atTell, blocks, obj.Key)
	}
}

// A part of the object that another handle holds, its bytes long in the
// cache, does not hold back the news of a whole read.
func TestReadWholeIsToldWhileAnotherHandleHoldsAPart(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	c := &blockCache{data: map[string][]byte{}, blockSize: cfg.BlockSize}
	s := newTestEngine(t, cfg, &fakeFetcher{}, c)
	obj := fakeObject("held", 12*cfg.BlockSize)
	buf := make([]byte, cfg.BlockSize)
	other := s.OpenReader(obj, false, 0)
	defer other.Close()
	if _, _, err := other.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	r := s.OpenReader(obj, false, 0)
	for off := int64(0); off < obj.Size; off += cfg.BlockSize {
		if n, _, err := r.ReadAt(ctx, buf, off); (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], wantBytes(obj, off, len(buf))) {
			t.Fatalf("read at %d: %d bytes, %v", off, n, err)
		}
	}
	r.Close()
	settledStats(t, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.wholes) != 1 {
		t.Fatalf("a whole read closed while another handle holds a part of the object: ReadDone told of %v; want [%s]", c.wholes, obj.Key)
	}
}

// TestAGuessTellsTheCacheItsObjectIsReadWhole: next-shard read-ahead that
// fetches the start of the object expected next tells the cache, before
// anyone opens it, that a stream will read it whole (so the cache writes
// its file from the guess's blocks); the stream that opens it takes that
// over and tells the cache how its read ended, with no second telling;
// a guess dropped with nobody having opened it tells the cache it was not
// read whole.
func TestAGuessTellsTheCacheItsObjectIsReadWhole(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	c := &blockCache{data: map[string][]byte{}, blockSize: cfg.BlockSize}
	s := newTestEngine(t, cfg, &fakeFetcher{}, c)
	a, b, d := fakeObject("a.tar", 40*cfg.BlockSize), fakeObject("b.tar", 40*cfg.BlockSize), fakeObject("d.tar", 40*cfg.BlockSize)
	s.SetOrder([]store.Object{a, b, d})
	readWhole := func(obj store.Object, upTo int64) {
		r := s.OpenReader(obj, false, 0)
		defer r.Close()
		buf := make([]byte, cfg.BlockSize)
		for off := int64(0); off < upTo; off += cfg.BlockSize {
			if n, _, err := r.ReadAt(ctx, buf, off); err != nil && err != io.EOF || !bytes.Equal(buf[:n], wantBytes(obj, off, n)) {
				t.Fatalf("read %s at %d: %d bytes, %v", obj.Key, off, n, err)
			}
		}
	}
	count := func(keys []string, key string) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k != key }))
	}
	readWhole(a, a.Size)
	if n := count(c.begun, b.Key); n != 1 {
		t.Fatalf("after a was read to its end, the cache was told %d times that %s is read whole, want once: the guess fetched its start", n, b.Key)
	}
	readWhole(b, b.Size)
	if n, w := count(c.begun, b.Key), count(c.wholes, b.Key); n != 1 || w != 1 {
		t.Fatalf("after b was read whole: told %d times it is read whole and %d times it was, want 1 and 1: the stream took the guess's telling over", n, w)
	}

	// b's reader guessed d; drop d's parts as eviction does, unopened.
	s.mu.Lock()
	if o := s.parts.find(d); o == nil || !o.wholeTold {
		s.mu.Unlock()
		t.Fatalf("reading b to its end did not guess %s", d.Key)
	}
	for _, p := range slices.Collect(maps.Values(s.parts.find(d).parts)) {
		s.removeLocked(p)
	}
	s.mu.Unlock()
	s.tells.deliver(&s.mu, s.cache)
	if n := count(c.ended, d.Key); n != 1 {
		t.Fatalf("a guess of %s dropped unopened told the cache %d times it was not read whole, want once", d.Key, n)
	}
}
