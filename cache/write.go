package cache

import (
	"github.com/shardfs/shardfs/store"
)

// pendingBlock is one block of a Put on its way to the tiers.
type pendingBlock struct {
	key   blockKey
	index int64
	data  []byte // aligned, padded to alignment; the cache's, or (ForReadAhead) the caller's until put returns
	size  int64  // the block's real length
}

// Put caches data, the bytes of obj from block index on, where place
// says: ForReadAhead in the ring alone (the reader keeps its own copy
// until it reads it, so RAM would hold it twice; with the ring off it is
// not kept: the reader's page cache will hold it, and copying a stream
// through a small RAM tier only evicts what random readers put there),
// ForRandomRead in the ring and the RAM tier, ForOneShot in the RAM tier
// alone, into free room. data is split into blocks, and a trailing partial
// block is kept only when it ends the object. Blocks the ring already
// holds are not rewritten.
//
// data is copied, except that ForReadAhead writes whole blocks whose
// address suits O_DIRECT (a prefetch part's buffer) from data itself,
// before Put returns; others go through a reused buffer, so a stream
// allocates nothing per block.
func (c *Cache) Put(obj store.Object, index int64, data []byte, place Placement) {
	c.put(obj, index*c.cfg.BlockSize, data, place)
}

func (c *Cache) put(obj store.Object, off int64, data []byte, place Placement) {
	bs := c.cfg.BlockSize
	if off < 0 || off >= obj.Size || len(data) == 0 {
		return
	}
	data = data[:min(int64(len(data)), obj.Size-off)]
	if !c.enter() {
		return
	}
	defer c.leave()
	r := c.liveRing()
	if place == ForOneShot {
		r = nil
	}
	inMemory := place != ForReadAhead && c.ram != nil
	if r == nil && !inMemory {
		return
	}
	var room int64 // what ForOneShot may still take; the RAM tier's free room
	if place == ForOneShot {
		c.ram.settle()
		room = c.ram.free()
	}
	ver := c.cfg.version(obj)
	var blocks []pendingBlock
	var pooled []*[]byte
	defer func() {
		for _, b := range pooled {
			c.bufs.Put(b)
		}
	}()
	for start := int64(0); start < int64(len(data)); start += bs {
		index := (off + start) / bs
		chunk := data[start:min(start+bs, int64(len(data)))]
		if int64(len(chunk)) != blockLength(obj, bs, index) {
			break
		}
		if r != nil && r.has(blockKey{version: ver, index: index}) {
			// Read-ahead over a cached stretch hands the same blocks back;
			// writing them again would only churn the ring.
			continue
		}
		var buf []byte
		switch {
		case inMemory:
			buf = alignedBuffer(int(alignUp(int64(len(chunk)))))
			copy(buf, chunk)
		case directInto(chunk):
			buf = chunk // written before put returns; never kept
		default:
			bufp := c.blockBuffer()
			pooled = append(pooled, bufp)
			buf = (*bufp)[:alignUp(int64(len(chunk)))]
			copy(buf, chunk)
			clear(buf[len(chunk):]) // no stale bytes of another block in the slot
		}
		blocks = append(blocks, pendingBlock{
			key:   blockKey{version: ver, index: index},
			index: index,
			data:  buf,
			size:  int64(len(chunk)),
		})
	}
	c.stats.puts.Add(uint64(len(blocks)))
	if r != nil {
		// Blocks for random reads that the RAM tier has no room for are
		// read next in small pieces from the ring (ReadChunks, through the
		// page cache): written through it, their first reads find them in
		// memory instead of on the disk.
		paged := place == ForRandomRead && c.ram != nil && c.ram.free() < int64(len(blocks))*bs
		c.writeRing(r, obj, blocks, paged)
	}
	if inMemory && len(blocks) > 0 {
		for _, b := range blocks {
			if place == ForOneShot {
				if room < b.size {
					break
				}
				room -= b.size
			}
			c.ram.set(b.key, b.data[:b.size])
		}
		c.ram.settle()
	}
}

// writeRing stores blocks in consecutive ring slots where it can, their
// data through the page cache when paged.
func (c *Cache) writeRing(r *ring, obj store.Object, blocks []pendingBlock, paged bool) {
	keys := make([]blockKey, len(blocks))
	for i, b := range blocks {
		keys[i] = b.key
	}
	slots := r.claim(keys)
	hdr := alignedBuffer(headerSize)
	failed := false
	for i, b := range blocks {
		n := slots[i]
		if n < 0 {
			continue
		}
		if failed {
			r.abort(n)
			continue
		}
		chunks, grains := sumBlock(b.data[:b.size], r.grain())
		h := slotHeader{
			Generation: r.generation(n),
			Index:      b.index,
			Length:     b.size,
			ChunkSize:  r.chunk(),
			Chunks:     chunks,
			Grains:     grains,
			Object:     objectIDOf(c.cfg.Namespace, c.cfg.key(obj)),
			Namespace:  c.cfg.Namespace,
			Key:        c.cfg.key(obj),
			ETag:       obj.ETag,
		}
		if err := h.encode(hdr); err != nil {
			// A name too long for a header stays in RAM only.
			r.abort(n)
			continue
		}
		if err := r.write(n, b.data, hdr, paged); err != nil {
			r.abort(n)
			c.disableRing(err)
			failed = true
			continue
		}
		r.commit(n, b.size, chunks, grains.tableSum())
		c.stats.ringWrites.Add(1)
	}
}
