package cache

import (
	"errors"

	"github.com/shardfs/shardfs/store"
)

// ReadAt copies obj's bytes [off, off+len(p)), clipped to obj.Size, into p
// when every block they touch is cached for obj's version and, for ring
// blocks, passes its CRC check. Otherwise ok is false and p holds nothing
// promised. A read at or past the end of the object serves 0 bytes.
func (c *Cache) ReadAt(obj store.Object, p []byte, off int64) (n int, ok bool) {
	if off < 0 {
		return 0, false
	}
	end := min(off+int64(len(p)), obj.Size)
	if off >= end {
		return 0, true
	}
	if !c.enter() {
		return 0, false
	}
	defer c.leave()
	bs := c.cfg.BlockSize
	ver := versionOfObject(c.cfg.Namespace, obj)
	for index := off / bs; index*bs < end; index++ {
		start := index * bs
		lo, hi := max(off, start), min(end, start+bs)
		k := blockKey{version: ver, index: index}
		if !c.readBlock(k, blockLength(obj, bs, index), lo-start, p[lo-off:hi-off]) {
			return 0, false
		}
	}
	return int(end - off), true
}

// Block returns block index of obj, whole, when it is cached and (from
// the ring) verified. The slice is shared, never written again and never
// reused by the cache: a caller may keep it as long as it likes, but must
// not modify it. A RAM hit costs no copy; a block read from the ring is
// promoted to RAM, where the caller is likely to come back for it.
func (c *Cache) Block(obj store.Object, index int64) ([]byte, bool) {
	return c.block(obj, index, true)
}

// MemBlock is Block from the RAM tier alone: it never reads the ring, so
// it never waits on the disk.
func (c *Cache) MemBlock(obj store.Object, index int64) ([]byte, bool) {
	return c.block(obj, index, false)
}

func (c *Cache) block(obj store.Object, index int64, fromRing bool) ([]byte, bool) {
	bs := c.cfg.BlockSize
	if index < 0 || index*bs >= obj.Size || !c.enter() {
		return nil, false
	}
	defer c.leave()
	k := blockKey{version: versionOfObject(c.cfg.Namespace, obj), index: index}
	want := blockLength(obj, bs, index)
	if b, ok := c.ramBlock(k, want); ok {
		c.stats.ramBytesServed.Add(uint64(want))
		return b, true
	}
	if !fromRing {
		return nil, false
	}
	b := alignedBuffer(int(alignUp(want)))
	if !c.readRing(k, want, b) {
		return nil, false
	}
	b = b[:want]
	c.stats.ringBytesServed.Add(uint64(want))
	if c.ram != nil {
		c.ram.set(k, b)
	}
	return b, true
}

// ramBlock looks block k (want bytes long) up in the RAM tier and counts
// the hit or miss; callers count the bytes they serve.
func (c *Cache) ramBlock(k blockKey, want int64) ([]byte, bool) {
	if c.ram == nil {
		return nil, false
	}
	if b, ok := c.ram.get(k); ok && int64(len(b)) == want {
		c.stats.ramHits.Add(1)
		return b, true
	}
	c.stats.ramMisses.Add(1)
	return nil, false
}

// readRing reads block k, want bytes long, from the ring into buf (aligned,
// at least want rounded up to the alignment) and verifies it. Callers count
// the bytes they serve.
func (c *Cache) readRing(k blockKey, want int64, buf []byte) bool {
	r := c.liveRing()
	if r == nil {
		return false
	}
	ref, ok := r.pin(k)
	if ok && ref.length != want {
		r.unpin(ref.n)
		ok = false
	}
	if !ok {
		c.stats.ringMisses.Add(1)
		return false
	}
	err := r.readVerified(ref, buf)
	r.unpin(ref.n)
	if err != nil {
		c.ringReadFailed(r, ref, err)
		return false
	}
	c.stats.ringHits.Add(1)
	return true
}

// readBlock fills dst with block k's bytes from offset from, trying RAM
// first, then the ring. want is the block's full length.
func (c *Cache) readBlock(k blockKey, want, from int64, dst []byte) bool {
	if b, ok := c.ramBlock(k, want); ok {
		copy(dst, b[from:])
		c.stats.ramBytesServed.Add(uint64(len(dst)))
		return true
	}
	if from == 0 && int64(len(dst)) == want && directInto(dst) {
		// The whole block into a buffer O_DIRECT can fill: no bounce
		// copy. On failure dst holds junk, which ReadAt does not promise.
		if !c.readRing(k, want, dst) {
			return false
		}
		c.stats.ringBytesServed.Add(uint64(len(dst)))
		return true
	}
	bufp := c.blockBuffer()
	if !c.readRing(k, want, *bufp) {
		c.bufs.Put(bufp)
		return false
	}
	copy(dst, (*bufp)[from:want])
	c.stats.ringBytesServed.Add(uint64(len(dst)))
	// Not promoted to RAM: the caller keeps its copy (a read-ahead part, a
	// registered buffer). Block promotes what a reader will come back to.
	c.bufs.Put(bufp)
	return true
}

// ringReadFailed drops a block that could not be read back intact, so the
// caller refetches it.
func (c *Cache) ringReadFailed(r *ring, ref slotRef, err error) {
	r.drop(ref)
	c.stats.ringMisses.Add(1)
	if errors.Is(err, errChecksum) {
		c.stats.checksumFailures.Add(1)
		c.log.Warn("cache block failed its checksum; dropped", "slot", ref.n, "block", ref.key.index)
		return
	}
	c.log.Warn("cache block unreadable; dropped", "slot", ref.n, "block", ref.key.index, "err", err)
}
