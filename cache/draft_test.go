package cache

import (
	"testing"
	"testing/synctest"
)

// TestDraftBecomesTheWholeFile: a shard whose blocks are put for
// read-ahead from its first block on, in any order, becomes its
// whole-shard file once the last is in, holding the shard's bytes, with
// no copy from the ring; its first open does not check it again (its
// bytes were summed as it was made), and the ring holds the blocks too.
func TestDraftBecomesTheWholeFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		c := openCache(t, readsConfig(dir))
		o := newTestObject("drafted.tar", 6*testBlock+321)
		bs := c.BlockSize()
		putAhead(c, o.obj, 0, o.data[:2*bs]) // the first part begins the draft
		putAhead(c, o.obj, 4*bs, o.data[4*bs:])
		synctest.Wait()
		if c.HasWholeFile(o.obj) {
			t.Fatal("a whole-shard file made before every block was put")
		}
		putAhead(c, o.obj, 2*bs, o.data[2*bs:4*bs])
		synctest.Wait() // the copier committed the complete draft
		mustReadWhole(t, c, o)
		st := c.Stats()
		if st.WholeDrafts != 1 || st.WholeMade != 1 || st.WholeChecks != 0 {
			t.Errorf("%d drafts, %d whole-shard files made, %d checked at open; want 1, 1, 0", st.WholeDrafts, st.WholeMade, st.WholeChecks)
		}
		for i := int64(0); i*bs < o.obj.Size; i++ {
			if !c.Lookup(o.obj, i).Has(InRing) {
				t.Fatalf("block %d of a drafted shard is not in the ring", i)
			}
		}
		if names := wholeEntries(t, dir); len(names) != 1 {
			t.Fatalf("whole-shard dir holds %v, want the one file", names)
		}
	})
}

// TestDraftOfAShardNotReadWholeIsDiscarded: a handle that began a draft
// and closed without reading the shard whole leaves no file behind and
// gives its room back; one that read it whole before its last blocks
// reached the cache has its draft committed when they do.
func TestDraftOfAShardNotReadWholeIsDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		c := openCache(t, readsConfig(dir))
		bs := c.BlockSize()
		partly := newTestObject("partly.tar", 4*testBlock)
		putAhead(c, partly.obj, 0, partly.data[:bs])
		c.ReadDone(partly.obj, false)
		synctest.Wait()
		if names := wholeEntries(t, dir); len(names) != 0 || c.HasWholeFile(partly.obj) {
			t.Fatalf("a draft of a shard not read whole left %v behind", names)
		}

		late := newTestObject("late.tar", 4*testBlock)
		putAhead(c, late.obj, 0, late.data[:2*bs])
		c.ReadDone(late.obj, true) // the reader closed; its last part's bytes are still on their way to the cache
		synctest.Wait()
		if c.HasWholeFile(late.obj) {
			t.Fatal("made whole before its last blocks were put")
		}
		putAhead(c, late.obj, 2*bs, late.data[2*bs:])
		synctest.Wait()
		mustReadWhole(t, c, late)
	})
}

// readsConfig is wholeConfig for a mount's cache, which keeps the shards
// its handles read whole.
func readsConfig(dir string) Config {
	cfg := wholeConfig(dir, 64)
	cfg.WholeFromReads = true
	return cfg
}
