package cache

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/shardfs/shardfs/store"
)

// ReadAt copies obj's bytes [off, off+len(p)), clipped to obj.Size, into p
// when every block they touch is cached for obj's version and, for ring
// blocks, passes its CRC check. Otherwise ok is false and p holds nothing
// promised. A read at or past the end of the object serves 0 bytes.
//
// place says what the ring blocks read are for: ForReadAhead (the caller
// keeps its copy) promotes none; ForOneShot copies them into the RAM tier
// as far as its free room takes, evicting nothing (reads running at the
// same time may share the same room, and overshoot it by their blocks):
// one-shot readers have no page cache behind them, so the RAM tier is the
// only place their next read can come from, and a tier already full costs
// them nothing. ForRandomRead promotes like ForOneShot.
func (c *Cache) ReadAt(obj store.Object, p []byte, off int64, place Placement) (n int, ok bool) {
	return c.readAt(obj, p, off, place != ForReadAhead)
}

func (c *Cache) readAt(obj store.Object, p []byte, off int64, promote bool) (n int, ok bool) {
	if off < 0 {
		return 0, false
	}
	end := min(off+int64(len(p)), obj.Size)
	if off >= end {
		return 0, true
	}
	if !c.life.enter() {
		return 0, false
	}
	defer c.life.leave()
	bs := c.cfg.BlockSize
	ver := c.version(obj)
	var room *atomic.Int64 // bytes the RAM tier takes from this read; nil: none
	if promote && c.ram != nil {
		c.ram.settle()
		room = new(atomic.Int64)
		room.Store(c.ram.free())
	}
	readOne := func(index int64) bool {
		start := index * bs
		lo, hi := max(off, start), min(end, start+bs)
		k := blockKey{version: ver, index: index}
		return c.readBlock(k, blockLength(obj, bs, index), lo-start, p[lo-off:hi-off], room)
	}
	first, last := off/bs, (end-1)/bs
	if first == last {
		ok = readOne(first)
	} else {
		ok = readBlocksConcurrently(first, last, readOne)
	}
	if !ok {
		return 0, false
	}
	return int(end - off), true
}

// ringReadsInFlight bounds the blocks one ReadAt reads at once. One
// O_DIRECT read at a time leaves an NVMe queue nearly idle, and a large
// READ of the GPU interface runs far below the speed of a memory copy.
const ringReadsInFlight = 8

// readBlocksConcurrently calls readOne for blocks first..last, up to
// ringReadsInFlight at a time, and reports whether every call succeeded.
// It returns only after every call it started has returned; after a
// failure it starts no more. A memory fault in a call (p is a client's
// shared mapping, truncated or unbacked under the read) is raised again
// in the caller's goroutine, as a copy made there would raise it: the
// GPU interface recovers it there, while in a goroutine of its own
// it would end the process.
func readBlocksConcurrently(first, last int64, readOne func(index int64) bool) bool {
	var (
		g         errgroup.Group
		failed    atomic.Bool
		faultOnce sync.Once
		fault     any
	)
	g.SetLimit(ringReadsInFlight)
	for index := first; index <= last && !failed.Load(); index++ {
		g.Go(func() error {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					if !isMemoryFault(r) {
						panic(r)
					}
					faultOnce.Do(func() { fault = r })
					failed.Store(true)
				}
			}()
			if !readOne(index) {
				failed.Store(true)
			}
			return nil
		})
	}
	g.Wait()
	if fault != nil {
		panic(fault)
	}
	return !failed.Load()
}

// isMemoryFault reports whether a recovered value is a fault that
// debug.SetPanicOnFault turned into a panic.
func isMemoryFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}

// Get returns block index of obj, whole, from the first of the tiers in
// from that holds it (RAM, then the ring, verified), and the tier that
// served it. The slice is shared, never written again and never reused by
// the cache: a caller may keep it as long as it likes, but must not modify
// it. A RAM hit costs no copy (one where the tier is shared: its slots
// are reused); a block read from the ring is promoted to RAM, where the
// caller is likely to come back for it.
func (c *Cache) Get(obj store.Object, index int64, from Tier) ([]byte, Tier, bool) {
	bs := c.cfg.BlockSize
	if index < 0 || index*bs >= obj.Size || !c.life.enter() {
		return nil, NotCached, false
	}
	defer c.life.leave()
	k := blockKey{version: c.version(obj), index: index}
	want := blockLength(obj, bs, index)
	if from.Has(InRAM) && c.ram != nil {
		if b, ok := c.ram.block(k, want); ok {
			c.stats.ramBytesServed.Add(uint64(want))
			return b, InRAM, true
		}
	}
	if !from.Has(InRing) {
		return nil, NotCached, false
	}
	b, ok := c.reads.readNew(k, want)
	if !ok {
		return nil, NotCached, false
	}
	c.stats.ringBytesServed.Add(uint64(want))
	if c.ram != nil {
		// Applied before the block is returned: the next read of the
		// block (another sample of it) must find it, not read it again
		// while ristretto's buffer still holds the set.
		c.ram.set(k, b)
		c.ram.settle()
	}
	return b, InRing, true
}

// readBlock fills dst with block k's bytes from offset from, trying RAM
// first, then the ring. want is the block's full length. A block read from
// the ring is copied into the RAM tier when room (nil: never) has want
// bytes left, which it then no longer has.
func (c *Cache) readBlock(k blockKey, want, from int64, dst []byte, room *atomic.Int64) bool {
	if c.ram != nil && c.ram.copyOut(k, want, from, dst) {
		return true
	}
	promote := room != nil && room.Load() >= want && room.Add(-want) >= 0
	if promote {
		// The RAM copy is read and checked in the daemon's own memory, then
		// copied out: never taken from dst, where a client may write
		// between the check and the copy, and every later reader would
		// be served what it wrote.
		b, ok := c.reads.readNew(k, want)
		if !ok {
			return false
		}
		copy(dst, b[from:])
		c.stats.ringBytesServed.Add(uint64(len(dst)))
		c.ram.set(k, b)
		return true
	}
	if from == 0 && int64(len(dst)) == want && directInto(dst) {
		// The whole block into a buffer O_DIRECT can fill: no bounce copy.
		if c.reads.readInto(k, want, dst, false) {
			c.stats.ringBytesServed.Add(uint64(len(dst)))
			return true
		}
		// Missing, corrupt, or written by its owner during the check: the
		// bounce buffer below decides, and drops only a block that fails
		// there.
	}
	bufp := c.bufs.get()
	if !c.reads.read(k, want, *bufp) {
		c.bufs.put(bufp)
		return false
	}
	copy(dst, (*bufp)[from:want])
	c.stats.ringBytesServed.Add(uint64(len(dst)))
	// Not promoted: the caller keeps its copy (a read-ahead part), and
	// Get promotes what a reader will come back to.
	c.bufs.put(bufp)
	return true
}
