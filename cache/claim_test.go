package cache

import (
	"bytes"
	"testing"
)

// A Put of more blocks than the ring has unpinned slots writes the blocks
// that got a slot and skips the rest: no block lands in a slot it did not
// claim. Pins here come from a lease; on a mount they come from readers and
// from the writes of other parts in flight, and a ring much smaller than the
// read-ahead runs out of unpinned slots the same way.
func TestPutPastTheUnpinnedSlotsSkipsTheBlocksLeftOver(t *testing.T) {
	const slots = 4
	c := openCache(t, ringConfig(t.TempDir(), slots))
	held := newTestObject("held.tar", 2*testBlock)
	held.putAll(c, 2)
	l, err := c.Lease(held.obj, 0, held.obj.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()

	// Two slots are free for a run of four blocks.
	run := newTestObject("run.tar", 4*testBlock)
	putAhead(c, run.obj, 0, run.data)

	if got := extentBytes(t, l); !bytes.Equal(got, held.data) {
		t.Fatal("a leased slot was overwritten by a block that claimed no slot")
	}
	mustRead(t, c, held, 0, held.obj.Size)
	mustRead(t, c, run, 0, 2*testBlock)
	mustMiss(t, c, run, 2*testBlock, testBlock)
	mustMiss(t, c, run, 3*testBlock, testBlock)
	if st := c.Stats(); st.RingBytes != slots*testBlock || st.RingUsedSlots != slots || st.RingWrites != slots {
		t.Fatalf("ring holds %d bytes in %d slots after %d writes, want %d in %d after %d",
			st.RingBytes, st.RingUsedSlots, st.RingWrites, slots*testBlock, slots, slots)
	}

	// Once the lease is gone, the slots turn over as usual.
	l.Release()
	putAhead(c, run.obj, 0, run.data)
	mustRead(t, c, run, 0, run.obj.Size)
}
