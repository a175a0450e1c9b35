package cache

import (
	"context"
	"sync"

	"github.com/shardfs/shardfs/store"
)

// A shard a mount has read whole is kept as a whole-shard file, so that its
// next open is passed through to the kernel as after `shardfs warm`: a
// later pass over a data set then costs the daemon opens, not reads. The
// file is made from the shard's blocks in the ring and the RAM tier, each
// checked, in the background (MakeWholeFile), so that the pass
// that read it does not wait for the copy; it is remembered as checked
// (wholefile's MarkChecked), its bytes summed as they were copied, so its
// first open does not read it again. Two copies run at once: a pass over
// a data set closes its shards faster than one copy makes their files,
// and a file not made when the next pass opens its shard leaves that
// open to the daemon.

// promoteQueue bounds the shards waiting to be made whole files; past it
// ReadDone drops them (a later whole read asks again).
const promoteQueue = 64

// promoters is how many copies run at once.
const promoters = 2

// promoter runs the copies. It is started by the first shard read whole
// and stopped by Close.
type promoter struct {
	once   sync.Once
	queue  chan store.Object
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ReadDone tells the cache that a handle reading obj closed, and whether
// it read obj from its first byte to its last. A shard read whole is made
// a whole-shard file in the background when every block of it is in the
// ring or the RAM tier and the whole-shard tier has room for it. It never
// waits.
func (c *Cache) ReadDone(obj store.Object, whole bool) {
	if !whole || c.whole == nil || obj.Size <= 0 || !c.life.enter() {
		return
	}
	defer c.life.leave()
	if c.whole.Has(c.wholeShard(obj)) {
		return
	}
	p := &c.promote
	p.once.Do(func() {
		p.queue = make(chan store.Object, promoteQueue)
		p.ctx, p.cancel = context.WithCancel(context.Background())
		for range promoters {
			p.wg.Go(c.promoteLoop)
		}
	})
	select {
	case p.queue <- obj:
	default:
		c.stats.wholeQueueFull.Add(1)
	}
}

// promoteLoop makes whole-shard files of the shards queued, in order,
// until Close; promoters of it run at once.
func (c *Cache) promoteLoop() {
	p := &c.promote
	for {
		select {
		case <-p.ctx.Done():
			return
		case obj := <-p.queue:
			if !c.holdsAll(obj) {
				continue // a block is missing: the copy would stop at it
			}
			made, err := c.MakeWholeFile(p.ctx, obj)
			switch {
			case err != nil && p.ctx.Err() == nil:
				c.log.Warn("whole-shard file of a shard read whole not made", "key", obj.Key, "err", err)
			case made:
				c.whole.MarkChecked(c.wholeShard(obj))
			}
		}
	}
}

// holdsAll reports whether every block of obj is in the ring or the RAM
// tier (a stream's first blocks, fetched before it was known to stream,
// are in RAM alone): a copy that would stop at a missing block is not
// started.
func (c *Cache) holdsAll(obj store.Object) bool {
	bs := c.cfg.BlockSize
	for i := int64(0); i*bs < obj.Size; i++ {
		if c.Lookup(obj, i) == NotCached {
			return false
		}
	}
	return true
}

// stopPromoting ends the background copies, those running included, and
// waits for them.
func (c *Cache) stopPromoting() {
	p := &c.promote
	p.once.Do(func() {}) // no copier starts after this
	if p.cancel != nil {
		p.cancel()
		p.wg.Wait()
	}
}
