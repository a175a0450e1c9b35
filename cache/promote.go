package cache

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/shardfs/shardfs/cache/wholefile"
	"github.com/shardfs/shardfs/store"
)

// A shard a mount has read whole is kept as a whole-shard file, so that its
// next open is passed through to the kernel as after `shardfs warm`: a
// later pass over a data set then costs the daemon opens, not reads. The
// promoter finishes in the background the files written while their
// shards were read (build.go), and makes the others from the shard's
// blocks in the ring and the RAM tier, each checked (MakeWholeFile), so
// that the pass that read a shard does not wait for its file; a file is
// remembered as checked (wholefile's MarkChecked), its bytes summed as they
// were written, so its first open does not read it again. Four run at
// once: a pass over a data set closes its shards faster than one copy makes
// their files, the copies wait on the disk more than on the CPU, and a
// file not made when the next pass opens its shard leaves that open to the
// daemon.

// promoteQueue bounds the shards waiting to be made whole files; past it
// ReadDone drops them (a later whole read asks again).
const promoteQueue = 64

// promoters is how many copies run at once.
const promoters = 4

// promoter runs the copies: it owns their queue, their goroutines and the
// context that ends them. It is started by the first shard queued and
// stopped by Close. It reaches the cache only through the functions it
// is given.
type promoter struct {
	lookup      func(obj store.Object, index int64) Tier                                        // Cache.Lookup
	makeFile    func(ctx context.Context, obj store.Object) (bool, error)                       // Cache.MakeWholeFile
	finishFile  func(ctx context.Context, obj store.Object, b *wholefile.Builder) (bool, error) // Builder.Finish with Cache.checkedRead
	markChecked func(obj store.Object)                                                          // remembers obj's new file as checked
	blockSize   int64
	log         *slog.Logger
	queueFull   *atomic.Uint64 // shards dropped for a full queue
	asRead      *atomic.Uint64 // files finished that were written while read

	once   sync.Once
	queue  chan promotion
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// promotion is a shard read whole, with its file when one was written
// while it was read (build.go).
type promotion struct {
	obj  store.Object
	file *wholefile.Builder // nil: copied from the ring and the RAM tier
}

// drop lets w go unmade: the file written while its shard was read, if
// any, is abandoned.
func (w promotion) drop() {
	if w.file != nil {
		w.file.Abandon()
	}
}

// ReadDone tells the cache that a handle reading obj closed, and whether
// it read obj from its first byte to its last. A shard read whole is made
// a whole-shard file in the background: the file written while it was
// read (ReadingWhole) is finished, or, without one, its blocks are copied
// when every one is in the ring or the RAM tier and the whole-shard tier
// has room. A handle that did not read whole lets the file written for
// it go, once no other handle reads the shard whole. It never waits for
// a copy.
func (c *Cache) ReadDone(obj store.Object, whole bool) {
	if c.whole == nil || obj.Size <= 0 || !c.life.enter() {
		return
	}
	defer c.life.leave()
	file := c.builds.end(c.version(obj), whole)
	switch {
	case !whole:
		if file != nil {
			file.Abandon()
		}
	case file == nil && c.whole.Has(c.wholeShard(obj)):
	default:
		c.promote.add(promotion{obj: obj, file: file})
	}
}

// add queues a shard to be made a whole-shard file, starting the copies
// the first time; a shard that finds the queue full is dropped and
// counted.
func (p *promoter) add(w promotion) {
	p.once.Do(func() {
		p.queue = make(chan promotion, promoteQueue)
		p.ctx, p.cancel = context.WithCancel(context.Background())
		for range promoters {
			p.wg.Go(p.loop)
		}
	})
	select {
	case p.queue <- w:
	default:
		p.queueFull.Add(1)
		w.drop()
	}
}

// loop makes whole-shard files of the shards queued, in order, until
// stop; promoters of it run at once.
func (p *promoter) loop() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case w := <-p.queue:
			p.promoteOne(w)
		}
	}
}

// promoteOne finishes w's file, or makes one when every block of the
// shard is held.
func (p *promoter) promoteOne(w promotion) {
	obj := w.obj
	var made bool
	var err error
	switch {
	case w.file != nil:
		made, err = p.finishFile(p.ctx, obj, w.file)
	case !p.holdsAll(obj):
		return // a block is missing: the copy would stop at it
	default:
		made, err = p.makeFile(p.ctx, obj)
	}
	switch {
	case err != nil && p.ctx.Err() == nil:
		p.log.Warn("whole-shard file of a shard read whole not made", "key", obj.Key, "err", err)
	case made:
		p.markChecked(obj)
		if w.file != nil {
			p.asRead.Add(1)
		}
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
// them; the files written while read that were still queued are
// abandoned.
func (p *promoter) stop() {
	p.once.Do(func() {}) // no copier starts after this
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
	for {
		select {
		case w := <-p.queue:
			w.drop()
		default:
			return
		}
	}
}
