package cache

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

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

// promoter runs the copies: it owns their queue, their goroutines and the
// context that ends them. It is started by the first shard queued and
// stopped by Close. It reaches the cache only through the functions it
// is given.
type promoter struct {
	lookup      func(obj store.Object, index int64) Tier                  // Cache.Lookup
	makeFile    func(ctx context.Context, obj store.Object) (bool, error) // Cache.MakeWholeFile
	markChecked func(obj store.Object)                                    // remembers obj's new file as checked
	blockSize   int64
	log         *slog.Logger
	queueFull   *atomic.Uint64 // shards dropped for a full queue

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
	c.promote.add(obj)
}

// add queues obj to be made a whole-shard file, starting the copies the
// first time; a shard that finds the queue full is dropped and counted.
func (p *promoter) add(obj store.Object) {
	p.once.Do(func() {
		p.queue = make(chan store.Object, promoteQueue)
		p.ctx, p.cancel = context.WithCancel(context.Background())
		for range promoters {
			p.wg.Go(p.loop)
		}
	})
	select {
	case p.queue <- obj:
	default:
		p.queueFull.Add(1)
	}
}

// loop makes whole-shard files of the shards queued, in order, until
// stop; promoters of it run at once.
func (p *promoter) loop() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case obj := <-p.queue:
			p.promoteOne(obj)
		}
	}
}

// promoteOne makes obj a whole-shard file when every block of it is held.
func (p *promoter) promoteOne(obj store.Object) {
	if !p.holdsAll(obj) {
		return // a block is missing: the copy would stop at it
	}
	made, err := p.makeFile(p.ctx, obj)
	switch {
	case err != nil && p.ctx.Err() == nil:
		p.log.Warn("whole-shard file of a shard read whole not made", "key", obj.Key, "err", err)
	case made:
		p.markChecked(obj)
	}
}

// holdsAll reports whether every block of obj is in the ring or the RAM
// tier (a stream's first blocks, fetched before it was known to stream,
// are in RAM alone): a copy that would stop at a missing block is not
// started.
func (p *promoter) holdsAll(obj store.Object) bool {
	bs := p.blockSize
	for i := int64(0); i*bs < obj.Size; i++ {
		if p.lookup(obj, i) == NotCached {
			return false
		}
	}
	return true
}

// stop ends the background copies, those running included, and waits for
// them.
func (p *promoter) stop() {
	p.once.Do(func() {}) // no copier starts after this
	if p.cancel != nil {
		p.cancel()
		p.wg.Wait()
	}
}
