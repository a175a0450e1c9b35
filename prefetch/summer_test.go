package prefetch

import (
	"bytes"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// TestFetchedBlocksReachTheRingSummedOnArrival: a part's checksums are
// made while its bytes arrive (the GET reports them in 32 KiB pieces, as
// the S3 backend does), and the ring writes every block it takes under
// them instead of summing the part again; the ring then serves every
// block with the right bytes. A part whose head came first (a random
// read's) is summed across its head and its rest, also when the head ends
// inside a grain.
func TestFetchedBlocksReachTheRingSummedOnArrival(t *testing.T) {
	const bs = 64 << 10
	ctx := testContext(t)
	c := newRingCache(t, bs, 0)
	cfg := readerConfig(bs)
	cfg.SkipLaggingSink = false
	cfg.HeadSize = 6000 // a head that ends inside a grain
	s := newTestEngine(t, cfg, &fakeFetcher{report: 32 << 10}, c)
	seq := fakeObject("shard-seq.tar", 24*bs+777)
	st := s.Open(seq)
	readAll(ctx, t, st, seq, 100_000)
	st.Close()

	random := fakeObject("shard-random.tar", 4*bs)
	r := s.OpenReader(random, false, 0)
	buf := make([]byte, 4<<10)
	for _, off := range []int64{3*bs + 5, 1*bs + 9, 2*bs + 100, 7} { // random: parts start with a head GET
		if _, _, err := r.ReadAt(ctx, buf, off); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	s.Close() // every Keep call has returned

	st2 := c.Stats()
	if want := uint64(24 + 1 + 4); st2.RingWrites != want || st2.RingPresummed != st2.RingWrites {
		t.Errorf("ring writes %d (want %d), of them with the sums made on arrival %d: want all", st2.RingWrites, want, st2.RingPresummed)
	}
	for _, o := range []store.Object{seq, random} {
		p := make([]byte, o.Size)
		if n, ok := c.ReadAt(o, p, 0, cache.ForReadAhead); !ok || !bytes.Equal(p[:n], wantBytes(o, 0, int(o.Size))) {
			t.Errorf("%s from the ring: ok=%v, right bytes=%v", o.Key, ok, ok && bytes.Equal(p[:n], wantBytes(o, 0, int(o.Size))))
		}
	}
}
