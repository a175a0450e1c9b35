package cache

import (
	"bytes"
	"testing"
)

func TestBlockServesWholeVerifiedBlocks(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 32)
	c := openCache(t, cfg)
	o := newTestObject("b.tar", 3*testBlock+100) // a short last block
	o.putAll(c, 4)
	for index := int64(0); index < 4; index++ {
		got, ok := c.Block(o.obj, index)
		want := o.data[index*testBlock : min((index+1)*testBlock, o.obj.Size)]
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("Block(%d) = %d bytes, %v; want the block's %d bytes", index, len(got), ok, len(want))
		}
	}
	if _, ok := c.Block(o.obj, 4); ok {
		t.Fatal("Block past the end of the object was served")
	}

	// A flipped byte in the ring: Block declines rather than serving it.
	slot := slotOf(t, c, o, 1) // ringConfig has no RAM tier: Block reads the ring
	patchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+7, []byte{o.data[testBlock+7] ^ 0xff})
	if b, ok := c.Block(o.obj, 1); ok {
		t.Fatalf("Block served %d bytes of a block that fails its checksum", len(b))
	}
	if got, ok := c.Block(o.obj, 2); !ok || !bytes.Equal(got, o.data[2*testBlock:3*testBlock]) {
		t.Fatal("an intact ring block was not served")
	}
}
