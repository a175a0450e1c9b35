package prefetch

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// One random pass of 256 KiB reads over part of an object larger than the
// whole cache (fio's randread-256k over a large file) asks the store for
// exactly the bytes read: no read fetches the rest of its block, which
// would be pushed out of the cache before the block's other reads came.
// Small reads of the same object still fetch whole blocks, and so do
// large random reads of an object the cache can hold.
func TestRandomReadsOfAnObjectLargerThanTheCacheAreExact(t *testing.T) {
	const bs = 1 << 20
	c := newRingCache(t, bs, 16*bs) // room: a 256-block ring and 16 blocks of RAM
	if c.Room() >= 512*bs {
		t.Fatalf("cache room %d, want less than the 512 MiB object", c.Room())
	}
	for _, tc := range []struct {
		name      string
		size      int64 // the object's
		read      int   // bytes per read
		wantExact bool
	}{
		{"large reads of an object larger than the cache", 512 * bs, 256 << 10, true},
		{"small reads of an object larger than the cache", 512 * bs, 4 << 10, false},
		{"large reads of an object the cache holds", 64 * bs, 256 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{}
			s := newTestEngine(t, DefaultConfig(), f, c)
			obj := fakeObject("exact-"+tc.name, tc.size)
			var offs []int64
			for b := range int64(16) { // two reads in each of 16 blocks, never at 0, where a stream starts
				offs = append(offs, b*bs+int64(tc.read), b*bs+3*int64(tc.read))
			}
			rand.New(rand.NewPCG(5, 8)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
			buf := make([]byte, tc.read)
			var read int64
			for _, off := range offs {
				r := s.OpenReader(obj, false, 0)
				n, _, err := r.ReadAt(testContext(t), buf, off)
				r.Close()
				if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, tc.read)) {
					t.Fatalf("read of %d bytes at %d: %d bytes, err %v; not the object's bytes", tc.read, off, n, err)
				}
				read += int64(n)
			}
			st := settledStats(t, s)
			asked := f.askedBytes.Load()
			t.Logf("%d reads of %d bytes: %d bytes asked of the store, %d exact reads", len(offs), tc.read, asked, st.ExactReads)
			switch {
			case tc.wantExact && (asked != read || st.ExactReads != int64(len(offs))):
				t.Errorf("%d random reads of %d bytes of a %d MiB object (cache room %d MiB) asked the store for %d bytes in %d exact reads; want exactly the %d bytes read, each read exact",
					len(offs), tc.read, tc.size>>20, c.Room()>>20, asked, st.ExactReads, read)
			case !tc.wantExact && (st.ExactReads != 0 || asked < 16*bs):
				t.Errorf("%d random reads of %d bytes of a %d MiB object: %d exact reads, %d bytes asked; want whole blocks (at least the 16 touched) and no exact read",
					len(offs), tc.read, tc.size>>20, st.ExactReads, asked)
			}
		})
	}
}
