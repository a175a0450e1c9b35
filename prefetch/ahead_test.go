package prefetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// TestNextObjectStartIsFetchedBeforeItIsOpened: reading one object to its
// end prefetches the start of the next in listing order, and only that
// one; opening it finds its first part there and reads it without a
// second GET.
func TestNextObjectStartIsFetchedBeforeItIsOpened(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	a, b, c := fakeObject("a.tar", 200<<10), fakeObject("b.tar", 200<<10+5), fakeObject("c.tar", 200<<10)
	s.SetOrder([]store.Object{a, b, c})

	sa := s.Open(a)
	readAll(ctx, t, sa, a, 4096)
	sa.Close()
	// Settled, every GET the spill started has reached the fetcher.
	if st := settledStats(t, s); st.NextParts == 0 {
		t.Fatal("reading a to its end prefetched nothing of b")
	}
	if n := f.getsAt("c.tar", 0); n != 0 {
		t.Fatalf("c prefetched (%d GETs) with NextShards = 1", n)
	}

	sb := s.Open(b)
	defer sb.Close()
	if st := s.Stats(); st.NextFound != 1 {
		t.Fatalf("opening b: NextFound = %d, want 1", st.NextFound)
	}
	readAll(ctx, t, sb, b, 4096)
	if n := f.getsAt("b.tar", 0); n != 1 {
		t.Fatalf("b's first part fetched %d times, want once", n)
	}
}

// TestNextObjectSkipsOtherReadersShards: two readers splitting a listing
// (a and b now, c and d next) each prefetch the first object nobody has
// open or claimed: the reader of a passes over b (open) to c, the reader of
// b passes over c (claimed) to d, and b itself is never prefetched.
func TestNextObjectSkipsOtherReadersShards(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	var objs []store.Object
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		objs = append(objs, fakeObject(k, 100<<10))
	}
	s.SetOrder(objs)
	sa, sb := s.Open(objs[0]), s.Open(objs[1])
	defer sa.Close()
	defer sb.Close()
	readAll(ctx, t, sa, objs[0], 4096)
	readAll(ctx, t, sb, objs[1], 4096)
	if n := s.Stats().NextFound; n != 0 {
		t.Fatalf("NextFound = %d before any next object was opened", n)
	}
	// Open looks at the parts already made (fetched or in flight), so
	// these checks do not race the GETs.
	for i, k := range []string{"c", "d", "e"} {
		st := s.Open(objs[2+i])
		defer st.Close()
		want := int64(min(i+1, 2))
		if n := s.Stats().NextFound; n != want {
			t.Errorf("after opening %s: NextFound = %d, want %d (c and d prefetched, e not)", k, n, want)
		}
	}
}

// TestNextObjectSkipsShardsAlreadyRead: a faster reader opened b after a
// and read it to the end; when a's reader nears its end, b is not fetched
// again but c is, and in the next epoch (a opened again) b is prefetched
// once more.
func TestNextObjectSkipsShardsAlreadyRead(t *testing.T) {
	ctx, s, f, a, b, c := threeShards(t)
	readBWhileAIsOpen(ctx, t, s, a, b, false)
	if n := f.getsAt("b", 0); n != 1 {
		t.Errorf("b fetched %d times from 0, want once: its reader read it before a's neared its end", n)
	}
	sc := s.Open(c)
	if n := s.Stats().NextFound; n != 1 {
		t.Errorf("opening c: NextFound = %d, want 1", n)
	}
	sc.Close()

	sa := s.Open(a) // the next epoch
	readAll(ctx, t, sa, a, 4096)
	sa.Close()
	sb := s.Open(b)
	defer sb.Close()
	if n := s.Stats().NextFound; n != 2 {
		t.Errorf("opening b in the next epoch: NextFound = %d, want 2", n)
	}
}

// TestNextObjectSkipsAShardItsFellowOpenedFirst: readers taking shards
// from one queue open them in any order. b's reader opened it just before
// a's reader opened a, read it and closed it; a's spill then passes over b
// (read in this pass) to c, and b is fetched once.
func TestNextObjectSkipsAShardItsFellowOpenedFirst(t *testing.T) {
	ctx, s, f, a, b, _ := threeShards(t)
	readBWhileAIsOpen(ctx, t, s, a, b, true)
	if n := f.getsAt("b", 0); n != 1 {
		t.Errorf("b fetched %d times from 0, want once: its reader opened and read it before a's neared its end", n)
	}
	if n := f.getsAt("c", 0); n != 1 {
		t.Errorf("c fetched %d times from 0, want once: a's spill passes over b to c", n)
	}
}

// TestNextObjectRemembersReadShardsAcrossAListing: a listing refresh in
// the middle of a pass keeps which shards were read; a's spill passes over
// b (read) to c.
func TestNextObjectRemembersReadShardsAcrossAListing(t *testing.T) {
	ctx, s, f, a, b, c := threeShards(t)
	sa, sb := s.Open(a), s.Open(b)
	readAll(ctx, t, sb, b, 4096)
	sb.Close()
	s.SetOrder([]store.Object{a, b, c})
	readAll(ctx, t, sa, a, 4096)
	sa.Close()
	settledStats(t, s)
	if n := f.getsAt("b", 0); n != 1 {
		t.Errorf("b fetched %d times from 0, want once: the new listing forgot it was read", n)
	}
}

// TestNextObjectPrefetchYieldsToOpenStreams: what was prefetched for an
// object nobody has open is dropped when open streams need the memory.
func TestNextObjectPrefetchYieldsToOpenStreams(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 4 * cfg.PartSize
	f := &fakeFetcher{hold: make(chan struct{}), holdIf: func(o store.Object, _ int64) bool {
		return strings.HasPrefix(o.Key, "open")
	}}
	s := newTestEngine(t, cfg, f, nil)
	a, b := fakeObject("a", 100<<10), fakeObject("b", 100<<10)
	s.SetOrder([]store.Object{a, b})
	sa := s.Open(a)
	readAll(ctx, t, sa, a, int(cfg.PartSize))
	sa.Close()
	if s.Stats().NextParts < 2 {
		t.Fatalf("%d parts prefetched for b, want the 2 that half the budget holds", s.Stats().NextParts)
	}
	// Two open streams each wait for a part: with b's prefetch holding
	// half the budget, the second fits only by evicting it.
	partWaits := make(chan struct{}, 10)
	s.onPartWait = func() { partWaits <- struct{}{} }
	errs := make(chan error, 2)
	for _, key := range []string{"open1", "open2"} {
		obj := fakeObject(key, 1<<20)
		st := s.Open(obj)
		defer st.Close()
		go func() { errs <- readCheck(ctx, st, obj, make([]byte, cfg.PartSize), 0) }()
		<-partWaits
	}
	if s.Stats().Evicted == 0 {
		t.Fatal("open streams waited while prefetch for an unopened object kept the memory")
	}
	close(f.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestHintsPrefetchInOrderWithinBudget: hinted objects get their first
// part fetched in order while prefetch has room (half the budget); the
// rest follow as opened objects consume theirs.
func TestHintsPrefetchInOrderWithinBudget(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 4 * cfg.PartSize
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	x, y, z := fakeObject("x", 100<<10), fakeObject("y", 100<<10), fakeObject("z", 100<<10)
	s.Hint(x, y, z)
	if n := settledStats(t, s).HintParts; n != 2 {
		t.Fatalf("%d hinted parts started, want 2 (prefetch may use half of a 4-part budget)", n)
	}
	if f.getsAt("z", 0) != 0 {
		t.Fatal("z fetched before x and y were consumed")
	}
	sx := s.Open(x)
	defer sx.Close()
	if n := s.Stats().HintFound; n != 1 {
		t.Fatalf("opening x: HintFound = %d, want 1", n)
	}
	if err := readCheck(ctx, sx, x, make([]byte, cfg.PartSize), 0); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().HintParts; n != 3 {
		t.Fatalf("after x's first part was consumed, %d hinted parts, want 3", n)
	}
	sz := s.Open(z)
	defer sz.Close()
	if n := s.Stats().HintFound; n != 2 {
		t.Fatalf("opening z: HintFound = %d, want 2", n)
	}
	readAll(ctx, t, sz, z, 10000)
	if n := f.getsAt("z", 0); n != 1 {
		t.Fatalf("z's first part fetched %d times, want once", n)
	}
}

// TestObserveMovesTheWindow: reads served from the cache, reported with
// Observe, keep read-ahead going and release what they consumed.
func TestObserveMovesTheWindow(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("cached", 4<<20)
	st := s.Open(obj)
	defer st.Close()
	const observed = 1 << 20
	for off := int64(0); off < observed; off += 4096 {
		st.Observe(off, 4096)
	}
	if err := readCheck(ctx, st, obj, make([]byte, 4096), observed); err != nil {
		t.Fatal(err)
	}
	stats := s.Stats()
	if stats.PrefetchedServedBytes != 4096 {
		t.Fatalf("the read after observed reads found %d bytes read ahead, want 4096", stats.PrefetchedServedBytes)
	}
	if stats.PeakInUseBytes >= cfg.Memory {
		t.Fatalf("observed reads held the whole budget (%d): consumed parts not released", stats.PeakInUseBytes)
	}
}

// warmCache is a Cache that already holds every block of some objects on
// disk, and of others in memory. lose, when set, makes ReadAt fail for the
// blocks it accepts, as when the ring overwrites a block after Lookup said
// it was there.
type warmCache struct {
	*recordingCache
	warm, inMemory map[string]bool
	lose           func(obj store.Object, off int64) bool
	reads          *atomic.Int64 // ReadAt calls that served
	aheadBytes     *atomic.Int64 // bytes handed over by Put ForReadAhead
}

func newWarmCache(t *testing.T, cfg Config, warm ...string) warmCache {
	c := warmCache{recordingCache: newRecordingCache(t, cfg.BlockSize), warm: map[string]bool{}, inMemory: map[string]bool{}, reads: &atomic.Int64{}, aheadBytes: &atomic.Int64{}}
	for _, k := range warm {
		c.warm[k] = true
	}
	return c
}

func (c warmCache) Lookup(obj store.Object, index int64) cache.Tier {
	switch {
	case c.inMemory[obj.Key]:
		return cache.InRAM
	case c.warm[obj.Key] || c.has(obj.Key, index*c.blockSize):
		return cache.InRing
	}
	return cache.NotCached
}

func (c warmCache) Get(obj store.Object, index int64, from cache.Tier) ([]byte, cache.Tier, bool) {
	t := c.Lookup(obj, index) & from
	if t == cache.NotCached {
		return nil, t, false
	}
	off := index * c.blockSize
	return wantBytes(obj, off, int(min(c.blockSize, obj.Size-off))), t, true
}

func (c warmCache) Keep(obj store.Object, index int64, data []byte, sums cache.Sums, place cache.Placement, own bool) bool {
	if place == cache.ForReadAhead {
		c.aheadBytes.Add(int64(len(data)))
	}
	return c.recordingCache.Keep(obj, index, data, sums, place, own)
}

func (c warmCache) ReadAt(obj store.Object, p []byte, off int64, _ cache.Placement) (int, bool) {
	for b := off / c.blockSize * c.blockSize; b < off+int64(len(p)); b += c.blockSize {
		if c.Lookup(obj, b/c.blockSize) == cache.NotCached || (c.lose != nil && c.lose(obj, b)) {
			return 0, false
		}
	}
	c.reads.Add(1)
	return copy(p, wantBytes(obj, off, len(p))), true
}

// TestWarmCacheCostsNoGETs: over objects the cache already holds, reads
// served from the cache (Observe) cost no GET. Reaching the end of one
// object reads the start of the next from the cache when it is on disk,
// so that its open does not wait on the disk; a next object in the RAM
// tier needs no part at all.
func TestWarmCacheCostsNoGETs(t *testing.T) {
	cfg := smallConfig()
	f := &fakeFetcher{}
	cache := newWarmCache(t, cfg, "a", "b")
	cache.inMemory["c"], cache.inMemory["d"] = true, true
	s := newTestEngine(t, cfg, f, cache)
	a, b := fakeObject("a", 1<<20), fakeObject("b", 1<<20)
	c, d := fakeObject("c", 1<<20), fakeObject("d", 1<<20)
	s.SetOrder([]store.Object{a, b, c, d})
	observeAll := func(obj store.Object) {
		st := s.Open(obj)
		defer st.Close()
		for off := int64(0); off < obj.Size; off += 4096 {
			st.Observe(off, 4096)
		}
	}

	observeAll(a)
	stats := settledStats(t, s)
	if n := f.gets.Load(); n != 0 {
		t.Fatalf("%d GETs for reads over a warm cache", n)
	}
	if stats.NextParts == 0 || stats.CacheBytes == 0 {
		t.Fatalf("%d parts, %d bytes read ahead of a next object the cache holds on disk, want its start", stats.NextParts, stats.CacheBytes)
	}

	observeAll(c)
	if after := settledStats(t, s); after.NextParts != stats.NextParts || f.gets.Load() != 0 {
		t.Fatalf("%d parts prefetched for a next object in the RAM tier, %d GETs; want none", after.NextParts-stats.NextParts, f.gets.Load())
	}
}

// TestReadAheadLoadsCachedBlocks: over an object the cache holds on disk,
// reads are served from parts read from the cache, read-ahead loads the
// blocks ahead of the reader the same way, and nothing is fetched or put
// back. Over an object the cache holds in memory, read-ahead loads nothing.
func TestReadAheadLoadsCachedBlocks(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	cache := newWarmCache(t, cfg, "disk")
	cache.inMemory["ram"] = true
	s := newTestEngine(t, cfg, f, cache)
	obj := fakeObject("disk", 40<<10+123)
	st := s.Open(obj)
	defer st.Close()
	buf := make([]byte, 4<<10)
	for off := int64(0); off < obj.Size; off += int64(len(buf)) {
		n, cached, err := st.ReadAtFromRing(ctx, buf, off)
		if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], wantBytes(obj, off, len(buf))) {
			t.Fatalf("read at %d: %d bytes, %v, or wrong bytes", off, n, err)
		}
		if !cached {
			t.Fatalf("read at %d not reported as served from the cache", off)
		}
	}
	stats := settledStats(t, s)
	if f.gets.Load() != 0 || stats.FetchedBytes != 0 || cache.total() != 0 {
		t.Fatalf("%d GETs, %d bytes fetched, %d bytes put back for an object the cache holds", f.gets.Load(), stats.FetchedBytes, cache.total())
	}
	if stats.CacheBytes != obj.Size || stats.PrefetchedServedBytes == 0 {
		t.Fatalf("%d bytes read from the cache (want %d), %d served from read-ahead (want > 0)", stats.CacheBytes, obj.Size, stats.PrefetchedServedBytes)
	}

	ram := fakeObject("ram", 40<<10)
	rs := s.Open(ram)
	defer rs.Close()
	for off := int64(0); off < ram.Size; off += int64(len(buf)) {
		rs.Observe(off, int64(len(buf)))
	}
	if got := settledStats(t, s).CacheBytes - stats.CacheBytes; got != 0 {
		t.Fatalf("read-ahead over blocks in memory loaded %d bytes into parts", got)
	}
}

// TestCachedPartFallsBackToTheFetcher: a block the cache loses between
// the part's making and its read is fetched, with the rest of the part,
// and put in the cache; the reader sees the right bytes and a read served
// from fetched bytes is not reported as cached.
func TestCachedPartFallsBackToTheFetcher(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	cache := newWarmCache(t, cfg, "torn")
	cache.lose = func(_ store.Object, off int64) bool { return off >= 8<<10 }
	s := newTestEngine(t, cfg, f, cache)
	obj := fakeObject("torn", 16<<10)
	st := s.Open(obj)
	defer st.Close()
	buf := make([]byte, obj.Size)
	n, cached, err := st.ReadAtFromRing(ctx, buf, 0)
	if err != nil || n != len(buf) || !bytes.Equal(buf, wantBytes(obj, 0, len(buf))) {
		t.Fatalf("read = %d, %v, or wrong bytes", n, err)
	}
	if cached {
		t.Fatal("a read half served from a GET reported as cached")
	}
	st.Close()
	s.Close() // returns once every GET and its Keep call have ended
	stats := s.Stats()
	if stats.CacheBytes != 8<<10 || stats.FetchedBytes != 8<<10 {
		t.Fatalf("%d bytes from the cache, %d fetched; want 8 KiB each", stats.CacheBytes, stats.FetchedBytes)
	}
	if !cache.has("torn", 8<<10) || !cache.has("torn", 12<<10) || cache.total() != 8<<10 {
		t.Fatalf("fetched blocks not put back alone: sink got %d bytes", cache.total())
	}
}

// settledStats returns the engine's stats once no part is being filled
// or handed to the cache: a part's bytes are served before its GET's
// accounting and Keep call end, and the part is let go only after both.
// It waits for the GET pool's goroutines, one per GET: a GET that ends
// starts the GETs that follow it before its own goroutine is done, so the
// wait returns only once the last of them has ended. The test's context
// only bounds a wait for a GET that never ends.
func settledStats(t *testing.T, s *Engine) Stats {
	t.Helper()
	idle := make(chan struct{})
	go func() {
		s.gets.wait()
		close(idle)
	}()
	select {
	case <-idle:
		return s.Stats()
	case <-testContext(t).Done():
		s.mu.Lock()
		running, sinking := s.gets.running, s.gets.sinking
		s.mu.Unlock()
		t.Fatalf("%d parts still being filled, %d being handed to the cache, when the test's context ended", running, sinking)
		return Stats{}
	}
}

// TestSequentialReadersPutForReadAheadRandomReadersForRandomRead: every
// part a sequential reader reads, the block its first read waited on
// included, reaches the cache placed ForReadAhead (it need not stay in
// memory); the blocks of random reads arrive ForRandomRead, for the RAM
// tier to keep.
func TestSequentialReadersPutForReadAheadRandomReadersForRandomRead(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cache := newWarmCache(t, cfg)
	s := newTestEngine(t, cfg, &fakeFetcher{}, cache)
	seq, rnd := fakeObject("seq", 100<<10), fakeObject("rnd", 1<<20)
	st := s.Open(seq)
	readAll(ctx, t, st, seq, 4096)
	st.Close()
	rt := s.Open(rnd)
	for _, off := range []int64{512 << 10, 64 << 10, 900 << 10} {
		if err := readCheck(ctx, rt, rnd, make([]byte, 4096), off); err != nil {
			t.Fatal(err)
		}
	}
	rt.Close()
	s.Close() // returns once every Keep call has ended
	if got := cache.aheadBytes.Load(); got != seq.Size {
		t.Errorf("Put ForReadAhead received %d bytes, want the %d of the sequential object and none of the random reads", got, seq.Size)
	}
	if got := cache.total(); got != seq.Size+3*cfg.BlockSize {
		t.Errorf("the cache received %d bytes, want %d", got, seq.Size+3*cfg.BlockSize)
	}
}

func (c warmCache) Room() int64 { return 1 << 40 }

func (c warmCache) ReadChunks(obj store.Object, p []byte, off int64) (cache.Tier, bool) {
	n, ok := c.ReadAt(obj, p, off, cache.ForRandomRead)
	return cache.InRAM, ok && n == len(p)
}

func (c warmCache) RAMFree() int64 { return 1 << 40 }

// threeShards is an engine over a listing of three small objects.
func threeShards(t *testing.T) (context.Context, *Engine, *fakeFetcher, store.Object, store.Object, store.Object) {
	f := &fakeFetcher{}
	s := newTestEngine(t, smallConfig(), f, nil)
	a, b, c := fakeObject("a", 100<<10), fakeObject("b", 100<<10), fakeObject("c", 100<<10)
	s.SetOrder([]store.Object{a, b, c})
	return testContext(t), s, f, a, b, c
}

// readBWhileAIsOpen opens a and b (b first when bFirst), reads b to its
// end and closes it, then reads a to its end: a's window spills past its
// end after b was read. It returns once the GETs of the spill have ended,
// so that the fetcher has counted them.
func readBWhileAIsOpen(ctx context.Context, t *testing.T, s *Engine, a, b store.Object, bFirst bool) {
	t.Helper()
	var sa, sb *Stream
	if bFirst {
		sb, sa = s.Open(b), s.Open(a)
	} else {
		sa, sb = s.Open(a), s.Open(b)
	}
	readAll(ctx, t, sb, b, 4096)
	sb.Close()
	readAll(ctx, t, sa, a, 4096)
	sa.Close()
	settledStats(t, s)
}

// TestNextObjectFollowsItsOpenersStride: a loader worker that takes every
// other shard of a listing (worker 0 of 2: a0, a2, a4, …) while its fellow
// reads nothing gets the next shard it opens prefetched once its first two
// opens gave the stride: a4 and a6 are found prefetched, and no shard it
// skips is fetched after its second open. A second opener with no history
// still follows the listing order.
func TestNextObjectFollowsItsOpenersStride(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	var objs []store.Object
	for i := range 8 {
		objs = append(objs, fakeObject(fmt.Sprintf("a%d", i), 100<<10))
	}
	s.SetOrder(objs)
	const worker Opener = 4242
	for _, i := range []int{0, 2, 4, 6} {
		found := settledStats(t, s).NextFound
		st := s.OpenBy(objs[i], worker)
		if got := s.Stats().NextFound - found; i >= 4 && got != 1 {
			t.Errorf("opening a%d, the worker's third or later shard: found prefetched %d times, want 1", i, got)
		}
		readAll(ctx, t, st, objs[i], 4096)
		st.Close()
	}
	settledStats(t, s)
	for _, i := range []int{3, 5, 7} {
		if n := f.getsAt(objs[i].Key, 0); n != 0 {
			t.Errorf("a%d, a shard the worker skips, fetched %d times after its stride was known", i, n)
		}
	}
	if n := s.Stats().NextMissed; n != 0 {
		t.Errorf("NextMissed = %d for a worker that opened what its stride named", n)
	}

	// Another opener's first open (a5) has no history: the listing
	// order names a6, read in an earlier pass, fetched again; a7 is not.
	gets6 := f.getsAt(objs[6].Key, 0)
	st := s.OpenBy(objs[5], 7)
	readAll(ctx, t, st, objs[5], 4096)
	st.Close()
	settledStats(t, s)
	if f.getsAt(objs[6].Key, 0) != gets6+1 || f.getsAt(objs[7].Key, 0) != 0 {
		t.Errorf("an opener with no history read a5: a6 fetched %d more times, a7 %d; want the listing order's next shard, a6, once", f.getsAt(objs[6].Key, 0)-gets6, f.getsAt(objs[7].Key, 0))
	}
}

// TestNextObjectStopsGuessingWhenGuessesGoUnused: an opener whose opens
// follow no stride (a shuffled order) has its guesses left unused; after
// missesToMute of them it gets no more, so the shards it does not open are
// not fetched.
func TestNextObjectStopsGuessingWhenGuessesGoUnused(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	var objs []store.Object
	for i := range 32 {
		objs = append(objs, fakeObject(fmt.Sprintf("s%02d", i), 100<<10))
	}
	s.SetOrder(objs)
	order := []int{10, 13, 11, 15, 12, 16, 14, 20, 17, 21}
	for _, i := range order {
		st := s.OpenBy(objs[i], 99)
		readAll(ctx, t, st, objs[i], 4096)
		st.Close()
	}
	st := settledStats(t, s)
	if st.NextMissed != missesToMute {
		t.Errorf("NextMissed = %d, want %d: guesses stop once that many went unused", st.NextMissed, missesToMute)
	}
	opened := map[int]bool{}
	for _, i := range order {
		opened[i] = true
	}
	fetched := 0
	for i, o := range objs {
		if !opened[i] && f.getsAt(o.Key, 0) > 0 {
			fetched++
		}
	}
	// The listing order's guess after the first open, and one guess per
	// miss before the opener is muted.
	if fetched > 1+missesToMute {
		t.Errorf("%d shards the opener never opened were fetched, want at most %d", fetched, 1+missesToMute)
	}
}
