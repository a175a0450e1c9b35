package cache

import "github.com/shardfs/shardfs/store"

// ReadChunks copies obj's bytes [off, off+len(p)) into p when they lie in
// one block that the RAM tier or the ring holds for obj's version: from
// RAM as Get would, or from the ring by reading and checking only the
// grains of the block they lie in (grainSizeFor: 4 KiB of a 1 MiB block)
// and the slot's grain CRCs, with no copy into RAM. It is for a random
// reader's small read of a block that the RAM tier has no room to keep:
// through Get, each such read would read and check the whole block again.
// A grain that fails its check drops the block, as a whole-block read
// does.
func (c *Cache) ReadChunks(obj store.Object, p []byte, off int64) (Tier, bool) {
	if !insideOneBlock(obj, p, off, c.cfg.BlockSize) || !c.life.enter() {
		return NotCached, false
	}
	defer c.life.leave()
	bs := c.cfg.BlockSize
	index := off / bs
	k := blockKey{version: c.version(obj), index: index}
	want := blockLength(obj, bs, index)
	lo, hi := off-index*bs, off+int64(len(p))-index*bs
	if c.ram != nil && c.ram.copyOut(k, want, lo, p) {
		return InRAM, true
	}
	if !c.reads.readGrains(k, want, lo, hi, p) {
		return NotCached, false
	}
	c.stats.ringBytesServed.Add(uint64(len(p)))
	return InRing, true
}

// ReadRAM copies obj's bytes [off, off+len(p)) into p when they lie in one
// block that the RAM tier holds whole: a small read of a shared tier's
// block, copied out of its slot (a heap block a reader may keep whole,
// through Get). It reads no ring, and counts hits only: a caller that
// misses goes on to a read that counts the miss.
func (c *Cache) ReadRAM(obj store.Object, p []byte, off int64) bool {
	if c.ram == nil || !insideOneBlock(obj, p, off, c.cfg.BlockSize) || !c.life.enter() {
		return false
	}
	defer c.life.leave()
	bs := c.cfg.BlockSize
	index := off / bs
	k := blockKey{version: c.version(obj), index: index}
	return c.ram.copyHit(k, blockLength(obj, bs, index), off-index*bs, p)
}

// insideOneBlock reports whether [off, off+len(p)) is a non-empty range of
// obj inside one block.
func insideOneBlock(obj store.Object, p []byte, off, bs int64) bool {
	end := off + int64(len(p))
	return len(p) > 0 && off >= 0 && end <= obj.Size && off/bs == (end-1)/bs
}

// RAMFree is how many bytes the RAM tier can take before it evicts; 0
// without a RAM tier.
func (c *Cache) RAMFree() int64 {
	if c.ram == nil || !c.life.enter() {
		return 0
	}
	defer c.life.leave()
	return c.ram.free()
}
