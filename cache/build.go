package cache

import (
	"sync"

	"github.com/shardfs/shardfs/cache/wholefile"
	"github.com/shardfs/shardfs/store"
)

// A shard read in order from its first byte is written to its whole-shard
// file while it is read: every block a Put is given of it goes to the file
// instead of the ring (builds.write), from the Put's buffer, with the CRC
// its arrival was summed by, so a pass over a data set writes each block
// to the disk once. When the read ends whole (ReadDone) the promoter
// finishes the file, copying in the blocks cached before the build began
// (a next-shard guess's, the window's first parts) from the ring and the
// RAM tier, so a shard read whole is a file soon after its read ends, and
// the next pass over a data set is passed through (promote.go copies the
// shards read whole without a build).

// maxBuilds bounds the files being written at once, each with its room
// reserved in the whole-shard tier; a stream past it is made a file by a
// copy after its read.
const maxBuilds = 64

// builds are the whole-shard files being written while their shards are
// read, by object version.
type builds struct {
	mu sync.Mutex
	m  map[versionID]*build
}

// build is one file being written: b is nil until Begin returns.
type build struct {
	b       *wholefile.Builder
	readers int // handles reading the shard whole that have not ended
}

// ReadingWhole tells the cache that a handle reads obj in order from its
// first byte: the blocks the cache is given of obj go to its whole-shard
// file as well as to the ring, until the handle's read ends (ReadDone).
// It does nothing without a whole-shard tier or a live ring, for a shard
// the tier holds or that does not fit its quota.
func (c *Cache) ReadingWhole(obj store.Object) {
	if c.whole == nil || obj.Size <= 0 || c.liveRing() == nil || !c.life.enter() {
		return
	}
	defer c.life.leave()
	ver := c.version(obj)
	c.builds.mu.Lock()
	if e := c.builds.m[ver]; e != nil {
		e.readers++
		c.builds.mu.Unlock()
		return
	}
	if len(c.builds.m) >= maxBuilds {
		c.builds.mu.Unlock()
		return
	}
	if c.builds.m == nil {
		c.builds.m = map[versionID]*build{}
	}
	e := &build{readers: 1}
	c.builds.m[ver] = e
	c.builds.mu.Unlock()

	// Begin creates the file and may evict others for its room: outside
	// the lock, so Puts of other shards do not wait for it.
	b, ok, err := c.whole.Begin(c.wholeShard(obj), c.cfg.BlockSize)
	if err != nil {
		c.log.Warn("whole-shard file not begun", "key", obj.Key, "err", err)
	}
	c.builds.mu.Lock()
	defer c.builds.mu.Unlock()
	switch {
	case !ok:
		if c.builds.m[ver] == e {
			delete(c.builds.m, ver)
		}
	case c.builds.m[ver] != e:
		b.Abandon() // the read ended while the file was begun
	default:
		e.b = b
	}
}

// write hands the blocks of a Put to the file being written of their
// shard, if any, and returns those it did not take, for the ring: all of
// them when there is no such file. grain is the ring's, by which the
// blocks' arrival sums were made.
func (bs *builds) write(ver versionID, blocks []pendingBlock, grain int64) []pendingBlock {
	bs.mu.Lock()
	var file *wholefile.Builder
	if e := bs.m[ver]; e != nil {
		file = e.b
	}
	bs.mu.Unlock()
	if file == nil {
		return blocks
	}
	for i := range blocks {
		if !file.Write(blocks[i].index, blocks[i].data, blocks[i].sum(grain)) {
			return blocks[i:] // the file failed or is done: the ring takes the rest
		}
	}
	return nil
}

// end takes the file being written of ver when a handle reading it ends:
// whole, the file is the caller's to finish; otherwise the handle is no
// longer counted, and the last one out takes it to abandon. nil when
// there is none for the caller.
func (bs *builds) end(ver versionID, whole bool) *wholefile.Builder {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	e := bs.m[ver]
	if e == nil {
		return nil
	}
	if !whole {
		if e.readers--; e.readers > 0 {
			return nil
		}
	}
	delete(bs.m, ver)
	return e.b
}

// abandonAll abandons every file being written (Close).
func (bs *builds) abandonAll() {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for ver, e := range bs.m {
		if e.b != nil {
			e.b.Abandon()
		}
		delete(bs.m, ver)
	}
}
