package cache

import (
	"bytes"
	"testing"
)

// TestKeepHandsAnAlignedBlockToTheHeapTier: Keep makes a whole block the
// caller hands over the RAM tier's copy (served from the same memory, the
// ring written from it too), copies a block that is not O_DIRECT-aligned
// and says so, and an arena, which copies into its own slots, keeps
// nothing of the caller's.
func TestKeepHandsAnAlignedBlockToTheHeapTier(t *testing.T) {
	heap := Config{MemorySize: 8 * testBlock, BlockSize: testBlock}
	heapRing := ringConfig(t.TempDir(), 8)
	heapRing.MemorySize = 8 * testBlock
	for name, cfg := range map[string]Config{"heap tier": heap, "heap tier and ring": heapRing, "shared tier": sharedConfig(t, 8)} {
		c := openCache(t, cfg)
		o := newTestObject("keep/a.tar", 3*testBlock)
		buf := alignedBuffer(int(testBlock))
		copy(buf, o.data[:testBlock])
		kept := c.Keep(o.obj, 0, buf, Sums{}, ForRandomRead, true)
		c.ram.settle()
		got, tier, ok := c.Get(o.obj, 0, InRAM)
		if !ok || tier != InRAM || !bytes.Equal(got, o.data[:testBlock]) {
			t.Fatalf("%s: block 0 after Keep: ok=%v tier=%v, right bytes=%v", name, ok, tier, ok && bytes.Equal(got, o.data[:testBlock]))
		}
		same := &got[0] == &buf[0]
		if shared := c.SharesRAM(); kept == shared || same == shared {
			t.Errorf("%s: Keep reported kept=%v, the tier serves the caller's buffer=%v; want both %v", name, kept, same, !shared)
		}
		if cfg.Dir != "" {
			mustRead(t, c, o, 0, testBlock) // the ring's copy, written from the kept buffer
		}

		odd := make([]byte, testBlock+1)[1:] // not aligned: copied
		copy(odd, o.data[testBlock:2*testBlock])
		if c.Keep(o.obj, 1, odd, Sums{}, ForRandomRead, true) {
			t.Errorf("%s: Keep kept a buffer whose address does not suit O_DIRECT", name)
		}
		c.ram.settle()
		clear(odd)
		if got, _, ok := c.Get(o.obj, 1, InRAM); !ok || !bytes.Equal(got, o.data[testBlock:2*testBlock]) {
			t.Errorf("%s: block 1 changed with the caller's buffer after a Keep that copied it (ok=%v)", name, ok)
		}
	}
}

// TestKeepOwnsOnlyOneBlock: a buffer of several blocks offered to own is
// copied, not kept: a RAM entry for one of its blocks would hold all of it
// alive after the others left the tier, memory the tier never counted.
func TestKeepOwnsOnlyOneBlock(t *testing.T) {
	c := openCache(t, Config{MemorySize: 8 * testBlock, BlockSize: testBlock})
	o := newTestObject("keep/two.tar", 2*testBlock)
	buf := alignedBuffer(int(2 * testBlock))
	copy(buf, o.data)
	if c.Keep(o.obj, 0, buf, Sums{}, ForRandomRead, true) {
		t.Error("Keep kept a buffer of two blocks")
	}
	c.ram.settle()
	for i := int64(0); i < 2; i++ {
		got, _, ok := c.Get(o.obj, i, InRAM)
		if !ok || !bytes.Equal(got, o.data[i*testBlock:(i+1)*testBlock]) {
			t.Fatalf("block %d: ok=%v, right bytes=%v", i, ok, ok && bytes.Equal(got, o.data[i*testBlock:(i+1)*testBlock]))
		}
		if &got[0] == &buf[i*testBlock] {
			t.Errorf("block %d: the RAM tier serves the caller's two-block buffer", i)
		}
	}
}
