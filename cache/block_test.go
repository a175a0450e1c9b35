package cache

import (
	"bytes"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

func TestBlockServesWholeVerifiedBlocks(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 32)
	c := openCache(t, cfg)
	o := newTestObject("b.tar", 3*testBlock+100) // a short last block
	o.putAll(c, 4)
	for index := int64(0); index < 4; index++ {
		got, _, ok := c.Get(o.obj, index, InRAM|InRing)
		want := o.data[index*testBlock : min((index+1)*testBlock, o.obj.Size)]
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("Block(%d) = %d bytes, %v; want the block's %d bytes", index, len(got), ok, len(want))
		}
	}
	if _, _, ok := c.Get(o.obj, 4, InRAM|InRing); ok {
		t.Fatal("Block past the end of the object was served")
	}

	// A flipped byte in the ring: Block declines rather than serving it.
	slot := slotOf(t, c, o, 1) // ringConfig has no RAM tier: Block reads the ring
	cachetest.PatchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+7, []byte{o.data[testBlock+7] ^ 0xff})
	if b, _, ok := c.Get(o.obj, 1, InRAM|InRing); ok {
		t.Fatalf("Block served %d bytes of a block that fails its checksum", len(b))
	}
	if got, _, ok := c.Get(o.obj, 2, InRAM|InRing); !ok || !bytes.Equal(got, o.data[2*testBlock:3*testBlock]) {
		t.Fatal("an intact ring block was not served")
	}
}

// TestReadAheadGoesToTheRingOnly: read-ahead handed to the cache is written
// to the ring and not copied into RAM; with no ring it is not kept at all,
// while a put ForRandomRead still fills RAM.
func TestReadAheadGoesToTheRingOnly(t *testing.T) {
	o := newTestObject("ahead.tar", 4*testBlock)
	withRing := ringConfig(t.TempDir(), 32)
	withRing.MemorySize = 1 << 20
	c := openCache(t, withRing)
	aligned := alignedBuffer(len(o.data))
	copy(aligned, o.data)
	putAhead(c, o.obj, 0, aligned) // written from aligned itself
	mustRead(t, c, o, 0, o.obj.Size)
	if st := c.Stats(); st.RAMBytes != 0 || st.RingBytes == 0 {
		t.Errorf("with a ring: RAM holds %d bytes and the ring %d, want 0 and the object", st.RAMBytes, st.RingBytes)
	}

	// Bytes at an address O_DIRECT cannot use take the bounce buffer; both
	// ways the ring holds the object.
	unaligned := openCache(t, ringConfig(t.TempDir(), 32))
	shifted := make([]byte, len(o.data)+1)[1:]
	copy(shifted, o.data)
	if directInto(shifted[:testBlock]) || !directInto(aligned[:testBlock]) {
		t.Fatal("the test's buffers do not cover both ways")
	}
	putAhead(unaligned, o.obj, 0, shifted)
	mustRead(t, unaligned, o, 0, o.obj.Size)

	ramOnly := openCache(t, Config{MemorySize: 1 << 20})
	putAhead(ramOnly, o.obj, 0, o.data)
	mustMiss(t, ramOnly, o, 0, testBlock)
	putRange(ramOnly, o.obj, 0, o.data)
	mustRead(t, ramOnly, o, 0, o.obj.Size)
}
