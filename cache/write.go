package cache

import (
	"github.com/shardfs/shardfs/store"
)

// pendingBlock is one block of a Put on its way to the tiers.
type pendingBlock struct {
	key   blockKey
	index int64
	data  []byte // aligned, padded to alignment; the cache's, or the caller's: until put returns (ForReadAhead; a block the arena copies), or handed over (Keep)
	size  int64  // the block's real length
	inRAM bool   // offered to the RAM tier, which keeps data
	paged bool   // written to the ring through the page cache (ringFile.writePaged)
	sums  Sums   // the grain CRCs of the run data came in, when summed as it arrived
	at    int64  // where data starts in that run

}

// sum is the CRC32C of the block's bytes: combined from the grain CRCs
// summed as they arrived where there are some, else read once.
func (b *pendingBlock) sum(grain int64) uint32 {
	if grains, ok := b.sums.block(b.at, b.size, grain); ok {
		chunk := grain * grainsPerChunk
		chunks := chunksOf(&grains, b.size, grain)
		return blockSumOf(&chunks, b.size, chunk)
	}
	return checksum(b.data[:b.size])
}

// Put caches data, the bytes of obj from block index on, where place
// says: ForReadAhead in the ring alone (the reader keeps its own copy
// until it reads it, so RAM would hold it twice; with the ring off it is
// not kept: the reader's page cache will hold it, and copying a stream
// through a small RAM tier only evicts what random readers put there),
// ForRandomRead in the ring and the RAM tier's free room (the rest through
// the page cache; without a ring, in the RAM tier, evicting), ForOneShot in
// the RAM tier alone, into free room. data is split into blocks, and a
// trailing partial block is kept only when it ends the object. Blocks the
// ring already holds are not rewritten. The blocks of a shard whose
// whole-shard file is being written as it is read go to that file instead
// of the ring (build.go).
//
// data is copied, except that whole blocks whose address suits O_DIRECT
// (a prefetch part's buffer) are written to the ring from data itself,
// before Put returns, when they go to the ring alone (ForReadAhead) or to
// a shared RAM tier, which copies them into its slots; others go through
// a reused buffer, so a stream allocates nothing per block.
func (c *Cache) Put(obj store.Object, index int64, data []byte, place Placement) {
	c.put(obj, index*c.cfg.BlockSize, data, Sums{}, place, false)
}

// Keep is Put with the grain CRCs a Summer made of data while it arrived
// (Summer.From; none: the ring sums the blocks it writes itself). With
// own, data is one block and the whole of a buffer the caller gives up:
// the RAM tier may then keep data itself as its copy instead of copying it
// (when its address suits O_DIRECT, as a prefetch part's buffer's does),
// and kept says whether it did; the caller then never writes or reuses it.
// Only a one-block buffer is kept: a RAM entry that held a block of a
// bigger buffer would hold all of it alive, unaccounted, until its last
// block left the tier.
func (c *Cache) Keep(obj store.Object, index int64, data []byte, sums Sums, place Placement, own bool) (kept bool) {
	return c.put(obj, index*c.cfg.BlockSize, data, sums, place, own && int64(len(data)) <= c.cfg.BlockSize)
}

// put stores data at off; with handOver, RAM may keep data itself (Keep),
// and kept says whether it did.
func (c *Cache) put(obj store.Object, off int64, data []byte, sums Sums, place Placement, handOver bool) (kept bool) {
	bs := c.cfg.BlockSize
	if off < 0 || off >= obj.Size || len(data) == 0 {
		return false
	}
	data = data[:min(int64(len(data)), obj.Size-off)]
	if !c.life.enter() {
		return false
	}
	defer c.life.leave()
	r := c.liveRing()
	if place == ForOneShot {
		r = nil
	}
	inMemory := place != ForReadAhead && c.ram != nil
	if r == nil && !inMemory {
		return false
	}
	// intoRoom: the RAM tier takes blocks into its free room alone,
	// evicting nothing. ForOneShot has no other place. ForRandomRead with a
	// ring writes the blocks past that room through the page cache
	// instead (paged), where its small reads find them: evicting RAM
	// blocks for them would cost a fresh copy per block and push out blocks
	// whose ring copies were written past the page cache, so that their
	// next reads went to the disk (an object larger than the RAM tier,
	// read at random). Without a ring, RAM is the only place and evicts.
	intoRoom := inMemory && (place == ForOneShot || r != nil)
	var room int64 // with intoRoom, the RAM tier's free room still untaken
	if intoRoom {
		c.ram.settle()
		room = c.ram.free()
	}
	ver := c.version(obj)
	var blocks []pendingBlock
	var pooled []*[]byte
	defer func() {
		for _, b := range pooled {
			c.bufs.put(b)
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
		toRAM := inMemory && (!intoRoom || room >= int64(len(chunk)))
		if toRAM && intoRoom {
			room -= int64(len(chunk))
		}
		if r == nil && !toRAM {
			break // ForOneShot past the room: nowhere to go
		}
		var buf []byte
		switch {
		case toRAM && (handOver || c.ram.arena != nil) && directInto(chunk):
			// Handed over (Keep), or copied by the arena into a slot of
			// its own (memTier.set): no copy of ours is needed.
			buf = chunk
			kept = kept || c.ram.arena == nil
		case toRAM:
			buf = alignedBuffer(int(alignUp(int64(len(chunk)))))
			copy(buf, chunk)
		case directInto(chunk):
			buf = chunk // written before put returns; never kept
		default:
			bufp := c.bufs.get()
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
			inRAM: toRAM,
			paged: intoRoom && !toRAM,
			sums:  sums,
			at:    start,
		})
	}
	c.stats.puts.Add(uint64(len(blocks)))
	if r != nil && len(blocks) > 0 {
		key := c.cfg.key(obj)
		named := slotHeader{Object: objectIDOf(c.cfg.Namespace, key), Namespace: c.cfg.Namespace, Key: key, ETag: obj.ETag}
		// A shard whose whole-shard file is being written as it is
		// read (build.go) takes its blocks there instead of the ring:
		// the file is what its next open reads.
		if rest := c.builds.write(ver, blocks, r.grain()); len(rest) > 0 {
			r.writeBlocks(rest, named, c.disableRing)
		}
	}
	if inMemory && len(blocks) > 0 {
		for _, b := range blocks {
			if b.inRAM {
				c.ram.set(b.key, b.data[:b.size])
			}
		}
		c.ram.settle()
	}
	return kept
}

// writeBlocks stores blocks in consecutive ring slots where it can, the
// data of paged blocks through the page cache, each slot's header naming
// the object as named does. A write that fails calls failed (the cache
// switches the ring off) and aborts the blocks after it.
func (r *ring) writeBlocks(blocks []pendingBlock, named slotHeader, failed func(error)) {
	keys := make([]blockKey, len(blocks))
	for i, b := range blocks {
		keys[i] = b.key
	}
	slots := r.claim(keys)
	hdr := alignedBuffer(headerSize)
	broken := false
	for i, b := range blocks {
		n := slots[i]
		if n < 0 {
			continue
		}
		if broken {
			r.abort(n)
			continue
		}
		grains, summed := b.sums.block(b.at, b.size, r.grain())
		var chunks chunkSums
		if summed {
			chunks = chunksOf(&grains, b.size, r.grain())
		} else {
			chunks, grains = sumBlock(b.data[:b.size], r.grain())
		}
		h := named
		h.Generation = r.generation(n)
		h.Index = b.index
		h.Length = b.size
		h.ChunkSize = r.chunk()
		h.Chunks = chunks
		h.Grains = grains
		if err := h.encode(hdr); err != nil {
			// A name too long for a header stays in RAM only.
			r.abort(n)
			continue
		}
		if err := r.write(n, b.data, hdr, b.paged); err != nil {
			r.abort(n)
			failed(err)
			broken = true
			continue
		}
		r.commit(n, b.size, chunks, grains.tableSum())
		r.stats.ringWrites.Add(1)
		if summed {
			r.stats.ringPresummed.Add(1)
		}
	}
}
