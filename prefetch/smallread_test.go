package prefetch

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// newRingCache opens a real cache (ring in a temporary dir and a RAM tier of
// ram bytes) with blocks of bs bytes.
func newRingCache(t *testing.T, bs, ram int64) *cache.Cache {
	t.Helper()
	cfg := cache.DefaultConfig()
	cfg.Dir, cfg.Size, cfg.MemorySize, cfg.BlockSize, cfg.SizeGiven = t.TempDir(), 256*bs, ram, bs, true
	cfg.Namespace = "test://smallread"
	c, err := cache.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// warmRing puts every block of obj in c's ring only, as read-ahead does.
func warmRing(t *testing.T, c *cache.Cache, obj store.Object) {
	t.Helper()
	data := wantBytes(obj, 0, int(obj.Size))
	c.Put(obj, 0, data, cache.ForReadAhead)
	if got := c.Stats().RingWrites; got == 0 {
		t.Fatal("the ring took no block")
	}
}

// A map-style reader reads samples far smaller than a block, in random
// order. Each read of a ring block must not read and checksum the whole
// block again: the block is promoted into RAM on its first read.
func TestSmallRandomReadsOfARingBlockReadItOnce(t *testing.T) {
	const bs = 1 << 20
	for _, sample := range []int{4 << 10, 100 << 10} {
		c := newRingCache(t, bs, 64*bs)
		obj := fakeObject("shard-small.tar", 8*bs+512)
		warmRing(t, c, obj)
		s := newTestEngine(t, readerConfig(bs), &fakeFetcher{}, c)
		rng := rand.New(rand.NewPCG(1, uint64(sample)))
		before := c.Stats().RingBytesRead
		const reads = 100
		var delivered int64
		for range reads {
			// One handle per sample, as a Dataset that opens the shard in
			// __getitem__ does; the block is block 3, away from offset 0.
			off := 3*bs + rng.Int64N(bs-int64(sample))
			r := s.OpenReader(obj, false, 0)
			buf := make([]byte, sample)
			n, _, err := r.ReadAt(testContext(t), buf, off)
			r.Close()
			if err != nil || n != sample {
				t.Fatalf("read %d at %d: n=%d err=%v", sample, off, n, err)
			}
			if !bytes.Equal(buf, wantBytes(obj, off, sample)) {
				t.Fatalf("read %d at %d: wrong bytes", sample, off)
			}
			delivered += int64(n)
		}
		read := int64(c.Stats().RingBytesRead - before)
		if read > 2*bs {
			t.Errorf("%d random %d KiB reads inside one ring block read %d bytes from the ring (%.1f per byte delivered); want at most %d: the block read once",
				reads, sample>>10, read, float64(read)/float64(delivered), 2*bs)
		}
	}
}

// With the RAM tier full, a random reader's small read of a ring block
// reads and checks only the chunks it lies in (a sixteenth of a block):
// promoting the block would push out another that a later read comes back
// for.
func TestSmallRandomReadsWithTheRAMTierFullReadTheirChunks(t *testing.T) {
	const bs = 1 << 20
	c := newRingCache(t, bs, 2*bs)
	obj := fakeObject("shard-larger-than-ram.tar", 16*bs)
	warmRing(t, c, obj)
	filler := fakeObject("filler.tar", 2*bs)
	c.Put(filler, 0, wantBytes(filler, 0, int(filler.Size)), cache.ForRandomRead)
	if free := c.RAMFree(); free >= bs {
		t.Fatalf("the RAM tier has %d bytes free after it was filled", free)
	}
	s := newTestEngine(t, readerConfig(bs), &fakeFetcher{}, c)
	rng := rand.New(rand.NewPCG(2, 4096))
	const reads, sample = 200, 4 << 10
	before := c.Stats().RingBytesRead
	for range reads {
		off := bs + rng.Int64N(obj.Size-bs-sample)
		r := s.OpenReader(obj, false, 0)
		buf := make([]byte, sample)
		n, _, err := r.ReadAt(testContext(t), buf, off)
		r.Close()
		if err != nil || n != sample || !bytes.Equal(buf, wantBytes(obj, off, sample)) {
			t.Fatalf("read %d at %d: n=%d err=%v, or wrong bytes", sample, off, n, err)
		}
	}
	chunk := int64(bs / 16)
	if read := int64(c.Stats().RingBytesRead - before); read > reads*2*chunk {
		t.Errorf("%d random 4 KiB reads of ring blocks with the RAM tier full read %d bytes from the ring (%d per read); want at most 2 chunks (%d) per read",
			reads, read, read/reads, 2*chunk)
	}
}
