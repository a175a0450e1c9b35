package cache

import (
	"sync"

	"github.com/shardfs/shardfs/cache/wholefile"
	"github.com/shardfs/shardfs/store"
)

// A shard read in order from its first byte is written to its whole-shard
// file while it is read: every block a Put stores in the ring goes to the
// file as well (builds.write), from the same buffer, with the CRC the ring
// summed it by. When the read ends whole (ReadDone) the promoter finishes
// the file, filling the blocks cached before the build began from the ring
// and the RAM tier, so the shard is a file as soon as its read ends, with
// no copy of its bytes after it: the next pass over a data set is passed
// through (promote.go copies the shards read whole without a build).

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

// write hands the blocks of a Put that the ring stored to the file being
// written of their shard, if any.
func (bs *builds) write(ver versionID, blocks []pendingBlock) {
	bs.mu.Lock()
	var file *wholefile.Builder
	if e := bs.m[ver]; e != nil {
		file = e.b
	}
	bs.mu.Unlock()
	if file == nil {
		return
	}
	for _, b := range blocks {
		if b.inRing {
			file.Write(b.index, b.data, b.sum)
		}
	}
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
