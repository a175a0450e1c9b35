package prefetch

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// Sparse stays cheap: 200 random 4 KiB reads spread over a 1 GiB shard,
// one handle each (a Dataset that opens the shard per sample), fetch at
// most two blocks per read, and never the rest of the shard.
func TestSparseRandomReadsOfALargeShardStayCheap(t *testing.T) {
	cfg := DefaultConfig() // 1 MiB blocks, 1 GiB budget
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("big.tar", 1<<30)
	const reads = 200
	randomSmallReads(t, s, obj, reads, 200)
	st := settledStats(t, s)
	if asked, limit := f.askedBytes.Load(), int64(reads)*2*cfg.BlockSize; asked > limit {
		t.Errorf("%d random 4 KiB reads asked the store for %d bytes, more than 2 blocks each (%d)", reads, asked, limit)
	}
	if st.DenseObjects != 0 || st.DenseParts != 0 {
		t.Errorf("%d objects, %d parts fetched as dense; want none: 200 reads of 1024 blocks are sparse", st.DenseObjects, st.DenseParts)
	}
}

// A shuffled map-style pass over a shard small next to the budget (one
// pread per ~100 KiB sample, four workers, a handle per sample), with no
// schedule to say it reads every sample, stays sparse: each block is
// fetched once, by the first read that lands in it, and later samples of
// the block are read from the cache; the store is asked for the shard's
// bytes about once, and every sample's bytes are right.
func TestShuffledPassOverASmallShardFetchesEachBlockOnce(t *testing.T) {
	const bs = 1 << 20
	cfg := DefaultConfig()
	c := newRingCache(t, bs, 256*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	obj := fakeObject("small.tar", 48*bs+4321)
	const sample = 100 << 10
	var offs []int64
	for off := int64(0); off < obj.Size; off += sample {
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(15, 48)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := make(chan int64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, sample)
			for off := range next {
				r := s.OpenReader(obj, false, 0)
				n, _, err := r.ReadAt(testContext(t), buf, off)
				r.Close()
				want := wantBytes(obj, off, int(min(sample, obj.Size-off)))
				if (err != nil && n != len(want)) || !bytes.Equal(buf[:n], want) {
					errs <- err
					return
				}
			}
		}()
	}
	for _, off := range offs {
		next <- off
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a sample's bytes differ from the source (err %v)", err)
	}
	st := settledStats(t, s)
	gets, asked := f.gets.Load(), f.askedBytes.Load()
	t.Logf("%d samples: %d GETs, %d bytes asked of a %d-byte shard, %d dense parts", len(offs), gets, asked, obj.Size, st.DenseParts)
	if st.DenseObjects != 0 {
		t.Errorf("DenseObjects = %d, want 0: samples of 100 KiB never take half of a shard on new blocks", st.DenseObjects)
	}
	if limit := obj.Size + obj.Size/20; asked > limit {
		t.Errorf("the pass asked the store for %d bytes, more than 1.05 x the shard (%d)", asked, limit)
	}
	if blocks := (obj.Size + bs - 1) / bs; gets > blocks {
		t.Errorf("the pass took %d GETs for a shard of %d blocks; want each block fetched once", gets, blocks)
	}
}

// Sparse random readers over many shards small next to the budget (200
// random 1 MiB reads at 4 KiB offsets over 32 shards of 64 MiB, four
// readers, a handle per read, a cache that holds everything) fetch at
// most twice the bytes they read: the blocks each read lies in, and no
// shard's rest.
func TestSparseReadersOfManySmallShardsFetchAtMostTwiceWhatTheyRead(t *testing.T) {
	const bs = 1 << 20
	cfg := DefaultConfig()
	c := newRingCache(t, bs, 4096*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	var objs []store.Object
	for i := range 32 {
		objs = append(objs, fakeObject(fmt.Sprintf("shard-%02d.tar", i), 64*bs))
	}
	const reads, size = 200, bs
	rng := rand.New(rand.NewPCG(200, 32))
	type read struct {
		obj store.Object
		off int64
	}
	var all []read
	for range reads {
		o := objs[rng.IntN(len(objs))]
		all = append(all, read{o, rng.Int64N((o.Size-size)/4096+1) * 4096})
	}
	next := make(chan read)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for rd := range next {
				r := s.OpenReader(rd.obj, false, 0)
				n, _, err := r.ReadAt(testContext(t), buf, rd.off)
				r.Close()
				if err != nil || !bytes.Equal(buf[:n], wantBytes(rd.obj, rd.off, size)) {
					errs <- fmt.Errorf("%s at %d: %d bytes, %v", rd.obj.Key, rd.off, n, err)
					return
				}
			}
		}()
	}
	for _, rd := range all {
		next <- rd
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := settledStats(t, s)
	asked := f.askedBytes.Load()
	t.Logf("%d reads of %d bytes: %d bytes asked of the store (%.2f x), %d dense objects", reads, size, asked, float64(asked)/float64(reads*size), st.DenseObjects)
	if limit := int64(2 * reads * size); asked > limit {
		t.Errorf("sparse readers asked the store for %d bytes, more than twice the %d they read", asked, reads*size)
	}
}

// With DenseRandom off (a mount whose cache keeps nothing), random reads of
// a small object fetch only what they touch.
func TestDenseRandomOffFetchesOnlyWhatIsRead(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DenseRandom = false
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("small.tar", 48<<20)
	buf := make([]byte, 4096)
	for _, off := range []int64{5 << 20, 20 << 20, 33 << 20, 1 << 20} {
		r := s.OpenReader(obj, false, 0)
		if _, _, err := r.ReadAt(testContext(t), buf, off); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if st := settledStats(t, s); st.DenseObjects != 0 || f.askedBytes.Load() > 4*2*cfg.BlockSize {
		t.Fatalf("DenseRandom off: %d dense objects, %d bytes asked for 4 reads; want none and at most 2 blocks a read", st.DenseObjects, f.askedBytes.Load())
	}
}

// A shuffled pass over an object larger than all the cache can keep stays
// sparse: fetched ahead of its reads, the rest of the object would push
// the blocks fetched first out before their reads came, and be fetched
// again.
func TestShuffledPassOverAnObjectLargerThanTheCacheStaysSparse(t *testing.T) {
	const bs = 1 << 20
	ccfg := cache.DefaultConfig()
	ccfg.MemorySize, ccfg.BlockSize = 16*bs, bs
	c, err := cache.Open(context.Background(), ccfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f := &fakeFetcher{}
	s := newTestEngine(t, DefaultConfig(), f, c)
	obj := fakeObject("larger-than-cache.tar", 48*bs)
	randomSmallReads(t, s, obj, 200, 4096)
	if st := settledStats(t, s); st.DenseObjects != 0 || st.DenseParts != 0 {
		t.Errorf("%d objects, %d parts fetched as dense; want none: a %d-byte object does not fit a cache of %d bytes", st.DenseObjects, st.DenseParts, obj.Size, c.Room())
	}
}

// randomSmallReads reads 4 KiB at n random offsets of obj (the same ones
// for the same seed), a handle per read as a Dataset that opens the shard
// per sample does, and checks every byte.
func randomSmallReads(t *testing.T, s *Engine, obj store.Object, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(15, seed))
	buf := make([]byte, 4096)
	for range n {
		off := rng.Int64N(obj.Size - int64(len(buf)))
		r := s.OpenReader(obj, false, 0)
		got, _, err := r.ReadAt(testContext(t), buf, off)
		r.Close()
		if err != nil || got != len(buf) || !bytes.Equal(buf, wantBytes(obj, off, got)) {
			t.Fatalf("read at %d: n=%d err=%v, or wrong bytes", off, got, err)
		}
	}
}

// A random reader of a large shard (sparse: each read fetches only its
// block) reads 4 KiB of a block and goes on to other blocks. Its block
// still reaches the cache whole: its GET is neither cancelled nor left
// parked after a head GET, so the block's other samples, read later, cost
// no second GET.
func TestARandomReaderGoneOnLetsItsBlockReachTheCache(t *testing.T) {
	cfg := DefaultConfig()
	bs := cfg.BlockSize
	f := &fakeFetcher{}
	sink := newRecordingCache(t, bs)
	s := newTestEngine(t, cfg, f, sink)
	obj := fakeObject("big.tar", 1<<30)
	r := s.OpenReader(obj, false, 0)
	defer r.Close()
	// At a block's start (a head GET first), mid-block, and at the start
	// again: each read leaves the block before its rest could arrive.
	offs := []int64{5 * bs, 700*bs + 300<<10, 300 * bs, 9*bs + 4096, 512 * bs}
	buf := make([]byte, 4096)
	for _, off := range offs {
		n, _, err := r.ReadAt(testContext(t), buf, off)
		if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, len(buf))) {
			t.Fatalf("read at %d: %d bytes, err %v, or wrong bytes", off, n, err)
		}
	}
	st := settledStats(t, s)
	for _, off := range offs {
		if !sink.has(obj.Key, off/bs*bs) {
			t.Errorf("block %d, read at %d, never reached the cache", off/bs, off)
		}
	}
	if st.Cancelled != 0 || f.cancelled.Load() != 0 {
		t.Errorf("%d parts, %d GETs cancelled; a random read's block is fetched whole", st.Cancelled, f.cancelled.Load())
	}
	if st.DenseObjects != 0 {
		t.Errorf("DenseObjects = %d; five reads of a 1 GiB shard are sparse", st.DenseObjects)
	}
}

// A random pass of large reads (fio's 256 KiB over an object the cache
// can hold) turns dense once it has taken a 64th of the object, long
// before it touches a quarter of the blocks, and every byte is right.
func TestLargeRandomReadsTurnDenseEarly(t *testing.T) {
	const bs, read = 1 << 20, 256 << 10
	cfg := DefaultConfig()
	cfg.Memory = 256 * bs // budget/8 = 32 MiB: the object is not small
	c := newRingCache(t, bs, 64*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	obj := fakeObject("large-reads.bin", 96*bs)
	var offs []int64
	for off := int64(0); off < obj.Size; off += read {
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(15, 256)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	buf := make([]byte, read)
	turnedAt := 0
	for i, off := range offs {
		r := s.OpenReader(obj, false, 0)
		n, _, err := r.ReadAt(testContext(t), buf, off)
		r.Close()
		if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, read)) {
			t.Fatalf("read at %d: %d bytes, err %v, or wrong bytes", off, n, err)
		}
		if turnedAt == 0 && s.Stats().DenseObjects == 1 {
			turnedAt = i + 1
		}
	}
	// 1.5 MiB (a 64th of 96 MiB) is 6 reads of 256 KiB; a quarter of
	// the blocks would take at least 24.
	if turnedAt == 0 || turnedAt > 6 {
		t.Errorf("the pass turned dense at read %d (0: never); want by read 6, when it had taken a 64th of the object", turnedAt)
	}
	settledStats(t, s)
	if asked, limit := f.askedBytes.Load(), obj.Size+obj.Size/20; asked > limit {
		t.Errorf("the pass asked the store for %d bytes, more than 1.05 x the object (%d)", asked, limit)
	}
}

// One sample read over and over (plus one elsewhere) is not a reader
// taking the object through: only reads that land on a new block count.
func TestOneSampleReadOverAndOverStaysSparse(t *testing.T) {
	const bs, read = 1 << 20, 256 << 10
	cfg := DefaultConfig()
	cfg.Memory = 256 * bs
	c := newRingCache(t, bs, 64*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	obj := fakeObject("one-sample.bin", 96*bs)
	buf := make([]byte, read)
	for i := range 100 {
		off := int64(7*bs + 4096)
		if i == 50 {
			off = 80 * bs
		}
		r := s.OpenReader(obj, false, 0)
		n, _, err := r.ReadAt(testContext(t), buf, off)
		r.Close()
		if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, read)) {
			t.Fatalf("read at %d: %d bytes, err %v, or wrong bytes", off, n, err)
		}
	}
	if st := settledStats(t, s); st.DenseObjects != 0 {
		t.Errorf("DenseObjects = %d; one sample read 99 times and one other read are sparse", st.DenseObjects)
	}
}

// The background parts of a dense object start while a read waits for the
// first bytes of its own GET: they are what the next reads find, and held
// back behind every read that missed they would start only in the gaps
// between misses. The test runs in a synctest bubble: once every goroutine
// waits, with the read of block 40 waiting on its held GET, every GET that
// starts before that one ends has started.
func TestDensePartsStartWhileAReadWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bs = 1 << 20
		cfg := DefaultConfig()
		cfg.PartSize = bs // denseInFlight parts cover the first 16 blocks
		// The object is not small next to the budget: its first read, a
		// 64th of it, turns it dense (the takenFraction rule).
		cfg.Memory = 256 * bs
		c := newRingCache(t, bs, 256*bs)
		obj := fakeObject("dense.tar", 64*bs)
		held, later := int64(40*bs), int64(32*bs)
		f := &fakeFetcher{
			hold:    make(chan struct{}),
			holdIf:  func(_ store.Object, off int64) bool { return off == held },
			started: make(chan string, 1024),
		}
		s := newTestEngine(t, cfg, f, c)
		r := s.OpenReader(obj, false, 0)
		defer r.Close()
		if _, _, err := r.ReadAt(testContext(t), make([]byte, bs), 10*bs+4096); err != nil {
			t.Fatalf("first read: %v", err)
		}
		buf := make([]byte, 4096)
		done := make(chan error, 1)
		go func() {
			_, _, err := r.ReadAt(testContext(t), buf, held)
			done <- err
		}()
		synctest.Wait()
		// Block 32 is fetched only once the parts before it are in: long
		// after the read of block 40 started waiting.
		key := func(off int64) string { return fmt.Sprintf("%s@%d", obj.Key, off) }
		started := map[string]bool{}
		for len(f.started) > 0 {
			started[<-f.started] = true
		}
		if !started[key(later)] {
			t.Fatalf("block %d was not fetched while the read of block %d waited on its GET (started: %d GETs, block %d's among them: %v)",
				later/bs, held/bs, len(started), held/bs, started[key(held)])
		}
		close(f.hold)
		if err := <-done; err != nil {
			t.Fatalf("read of block %d: %v", held/bs, err)
		}
		if want := wantBytes(obj, held, len(buf)); !bytes.Equal(buf, want) {
			t.Errorf("block %d's bytes differ from the source", held/bs)
		}
	})
}

// A read of a dense object's block that no part covers yet fetches from
// that block to the end of its part in one GET: it waits for no byte
// before its own, and the blocks after it cost no GET of their own.
func TestDenseMissFetchesToTheEndOfItsPart(t *testing.T) {
	const bs = 1 << 20
	cfg := DefaultConfig()
	cfg.PartSize = 4 * bs // denseInFlight parts cover the first 64 blocks
	cfg.Memory = 512 * bs // the object is not small next to it: a quarter of its blocks touched turns it dense
	c := newRingCache(t, bs, 256*bs)
	obj := fakeObject("dense.tar", 96*bs)
	covered := int64(denseInFlight) * cfg.PartSize
	f := &fakeFetcher{
		// The background parts stay on their way, so that they cover
		// the first 64 blocks and nothing past them.
		hold:   make(chan struct{}),
		holdIf: func(_ store.Object, off int64) bool { return off < covered },
	}
	s := newTestEngine(t, cfg, f, c)
	r := s.OpenReader(obj, false, 0)
	defer r.Close()
	// 64 KiB reads, past HeadSize: one GET each, no head first, each more
	// than two blocks from the last (a random reader's, not a stream). The
	// 24th block touched, a quarter of the object's, turns it dense.
	buf := make([]byte, 64<<10)
	blocks := []int64{78, 84, 76, 85, 75, 86, 74, 79, 73, 87, 72, 88, 71, 89, 70, 90, 69, 91, 68, 92, 67, 93, 66, 94}
	for _, block := range blocks {
		if _, _, err := r.ReadAt(testContext(t), buf, block*bs); err != nil {
			t.Fatalf("read of block %d: %v", block, err)
		}
	}
	if st := s.Stats(); st.DenseObjects != 1 {
		t.Fatalf("DenseObjects = %d, want 1", st.DenseObjects)
	}
	const miss = 81 // its part is blocks 80-83
	if _, _, err := r.ReadAt(testContext(t), buf, miss*bs+5); err != nil {
		t.Fatalf("read of block %d: %v", miss, err)
	}
	if want := wantBytes(obj, miss*bs+5, len(buf)); !bytes.Equal(buf, want) {
		t.Errorf("block %d's bytes differ from the source", miss)
	}
	if got, want := f.askedAtOff(obj.Key, miss*bs), 3*int64(bs); got != want {
		t.Errorf("the read of block %d asked the store for %d bytes from its block, want %d: to the end of its part", miss, got, want)
	}
	close(f.hold)
}
