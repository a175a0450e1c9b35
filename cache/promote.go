package cache

import (
	"context"
	"sync"

	"github.com/shardfs/shardfs/store"
)

// A shard a mount has read whole is kept as a whole-shard file, so that its
// next open is passed through to the kernel as after `shardfs warm`: a
// second pass over a data set then costs the daemon opens, not reads. The
// file is the shard's draft, written as its blocks were put (draft.go), or
// else made from the shard's blocks in the ring, each checked
// (MakeWholeFile); either one shard at a time in the background, so that
// the pass that read it does not wait for the sync or the copy.

// promoteQueue bounds the jobs waiting for the copier; past it they are
// dropped (a later whole read asks again).
const promoteQueue = 64

// promoter runs the copies and the commits of drafts (draft.go). It is
// started by the first shard to promote and stopped by Close.
type promoter struct {
	once   sync.Once
	queue  chan promotion
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// promotion is one job of the copier: a complete draft to commit, or a
// shard read whole to copy from the ring.
type promotion struct {
	draft *draft
	obj   store.Object
}

// ReadDone tells the cache that a handle reading obj closed, and whether
// it read obj from its first byte to its last. A shard read whole is kept
// as a whole-shard file: its draft, once its last blocks are in (they may
// reach the cache after the handle closed), or else a copy of its blocks
// in the ring, made in the background when every block is there and the
// tier has room. A handle that did not read it whole discards its draft.
// It never waits.
func (c *Cache) ReadDone(obj store.Object, whole bool) {
	if c.whole == nil || obj.Size <= 0 || !c.enter() {
		return
	}
	defer c.leave()
	if !whole {
		if dr := c.endDraft(obj); dr != nil {
			c.discard(dr)
		}
		return
	}
	if c.hasDraft(obj) || c.whole.has(wholeName(c.version(obj))) {
		return // the draft commits itself once complete
	}
	c.promoteLater(promotion{obj: obj})
}

// promoteLater queues a job for the copier, starting it on first use;
// past promoteQueue jobs waiting, the job is dropped and counted.
func (c *Cache) promoteLater(job promotion) {
	p := &c.promote
	p.once.Do(func() {
		p.queue = make(chan promotion, promoteQueue)
		p.ctx, p.cancel = context.WithCancel(context.Background())
		p.done = make(chan struct{})
		go c.promoteLoop()
	})
	select {
	case p.queue <- job:
	default:
		c.stats.wholeQueueFull.Add(1)
	}
}

// promoteLoop runs the jobs queued, in order, until Close.
func (c *Cache) promoteLoop() {
	p := &c.promote
	defer close(p.done)
	for {
		select {
		case <-p.ctx.Done():
			return
		case job := <-p.queue:
			var err error
			switch {
			case job.draft != nil:
				err = c.commitDraft(job.draft)
			case c.ringHoldsAll(job.obj):
				_, err = c.MakeWholeFile(p.ctx, job.obj)
			}
			if err != nil && p.ctx.Err() == nil {
				c.log.Warn("whole-shard file of a shard read whole not made", "err", err)
			}
		}
	}
}

// ringHoldsAll reports whether every block of obj is in the ring: a copy
// that would stop at a missing block is not started.
func (c *Cache) ringHoldsAll(obj store.Object) bool {
	bs := c.cfg.BlockSize
	for i := int64(0); i*bs < obj.Size; i++ {
		if !c.Lookup(obj, i).Has(InRing) {
			return false
		}
	}
	return true
}

// stopPromoting ends the background jobs, the one running included, waits
// for them, and discards the drafts.
func (c *Cache) stopPromoting() {
	p := &c.promote
	p.once.Do(func() {}) // no copier starts after this
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	c.discardDrafts()
}
