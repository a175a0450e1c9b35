package cache

import (
	"context"
	"sync"

	"github.com/shardfs/shardfs/store"
)

// A shard a mount has read whole is kept as a whole-shard file, so that its
// next open is passed through to the kernel as after `shardfs warm`: a
// later pass over a data set then costs the daemon opens, not reads. The
// file is made from the shard's blocks in the ring, each checked, one
// shard at a time in the background (MakeWholeFile), so that the pass
// that read it does not wait for the copy; it is remembered as checked
// (wholefile's MarkChecked), its bytes summed as they were copied, so its
// first open does not read it again.

// promoteQueue bounds the shards waiting to be made whole files; past it
// ReadDone drops them (a later whole read asks again).
const promoteQueue = 64

// A shard opened again while it waits for its copy (a second pass that
// came soon after the first) is copied by that open, before it returns,
// and the open is passed through (OpenWholeFile): read through the daemon
// instead, its blocks would be read from the ring once for the reader and
// once more for the copy. An open of a shard being copied waits for that
// copy.

// promoter runs the copies. It is started by the first shard read whole
// and stopped by Close.
type promoter struct {
	once   sync.Once
	queue  chan store.Object
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	pending map[objectKey]*promotion // shards queued or being copied
}

// objectKey names one version of an object.
type objectKey struct{ key, etag string }

// promotion is one shard's copy: taken once a copier (the loop or an
// open) has started it; done closed when it is over, made or not.
type promotion struct {
	taken bool
	done  chan struct{}
}

// take marks the copy of obj started by the caller and reports whether
// it was queued and not started yet.
func (p *promoter) take(obj store.Object) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.pending[objectKey{obj.Key, obj.ETag}]
	if e == nil || e.taken {
		return false
	}
	e.taken = true
	return true
}

// finish ends obj's copy, waking the opens that wait for it.
func (p *promoter) finish(obj store.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := objectKey{obj.Key, obj.ETag}
	if e := p.pending[k]; e != nil {
		delete(p.pending, k)
		close(e.done)
	}
}

// ReadDone tells the cache that a handle reading obj closed, and whether
// it read obj from its first byte to its last. A shard read whole is made
// a whole-shard file in the background when every block of it is in the
// ring and the whole-shard tier has room for it. It never waits.
func (c *Cache) ReadDone(obj store.Object, whole bool) {
	if !whole || c.whole == nil || obj.Size <= 0 || !c.enter() {
		return
	}
	defer c.leave()
	if c.whole.Has(c.wholeShard(obj)) {
		return
	}
	p := &c.promote
	p.once.Do(func() {
		p.queue = make(chan store.Object, promoteQueue)
		p.ctx, p.cancel = context.WithCancel(context.Background())
		p.done = make(chan struct{})
		p.pending = map[objectKey]*promotion{}
		go c.promoteLoop()
	})
	k := objectKey{obj.Key, obj.ETag}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == nil || p.pending[k] != nil {
		return // closed, or queued already
	}
	select {
	case p.queue <- obj:
		p.pending[k] = &promotion{done: make(chan struct{})}
	default:
		c.stats.wholeQueueFull.Add(1)
	}
}

// promoteBeforeOpen copies obj now when it is queued for its copy, or
// waits for the copy under way; it returns at once when neither.
func (c *Cache) promoteBeforeOpen(obj store.Object) {
	p := &c.promote
	p.mu.Lock()
	e := p.pending[objectKey{obj.Key, obj.ETag}]
	p.mu.Unlock()
	if e == nil {
		return
	}
	if p.take(obj) {
		c.promoteOne(obj)
		return
	}
	select {
	case <-e.done:
	case <-p.ctx.Done():
	}
}

// promoteLoop makes whole-shard files of the shards queued, in order,
// until Close.
func (c *Cache) promoteLoop() {
	p := &c.promote
	defer close(p.done)
	for {
		select {
		case <-p.ctx.Done():
			return
		case obj := <-p.queue:
			if p.take(obj) { // else an open copied it
				c.promoteOne(obj)
			}
		}
	}
}

// promoteOne makes obj's whole-shard file from the ring, taken by the
// caller (promoter.take), and finishes it.
func (c *Cache) promoteOne(obj store.Object) {
	p := &c.promote
	defer p.finish(obj)
	if !c.ringHoldsAll(obj) {
		return // a block is missing: the copy would stop at it
	}
	made, err := c.MakeWholeFile(p.ctx, obj)
	switch {
	case err != nil && p.ctx.Err() == nil:
		c.log.Warn("whole-shard file of a shard read whole not made", "key", obj.Key, "err", err)
	case made:
		c.whole.MarkChecked(c.wholeShard(obj))
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

// stopPromoting ends the background copies, the one running included, and
// waits for them.
func (c *Cache) stopPromoting() {
	p := &c.promote
	p.once.Do(func() {}) // no copier starts after this
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
}
