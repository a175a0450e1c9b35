package cache

import (
	"testing"
	"testing/synctest"
)

// TestReadDoneMakesAWholeFileFromTheRing: a shard read whole, every block in the
// ring, becomes a whole-shard file holding its bytes, in the background;
// one with a block missing from the ring does not, and leaves nothing
// behind. Close stops the copier.
func TestReadDoneMakesAWholeFileFromTheRing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		c := openCache(t, wholeConfig(dir, 64))
		o := newTestObject("read-whole.tar", 5*testBlock+77)
		o.putAll(c, 8)
		gap := newTestObject("gap.tar", 4*testBlock)
		putRange(c, gap.obj, 0, gap.data[:testBlock])
		putRange(c, gap.obj, 2*testBlock, gap.data[2*testBlock:])

		c.ReadDone(gap.obj, true)
		c.ReadDone(o.obj, true)
		synctest.Wait() // the copier has made what it could and waits for more
		mustReadWhole(t, c, o)
		if c.HasWholeFile(gap.obj) {
			t.Fatal("a shard with a block missing from the ring was made a whole-shard file")
		}
		if st := c.Stats(); st.WholeChecks != 0 {
			t.Errorf("%d whole-shard files checked at their first open, want 0: the copy summed the bytes", st.WholeChecks)
		}
		if names := wholeEntries(t, dir); len(names) != 1 {
			t.Fatalf("whole-shard files %v, want the one of %s", names, o.obj.Key)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
