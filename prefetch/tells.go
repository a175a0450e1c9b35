package prefetch

import (
	"sync"
	"sync/atomic"

	"github.com/shardfs/shardfs/store"
)

// A guess that an object comes next (nextShards) fetches its start, often
// all of it, before any stream opens it. The cache is told that a stream
// will read it whole (Cache.ReadingWhole) as the guess's first part is
// made, so that the blocks the guess fetches go to the object's
// whole-shard file as they arrive, as a stream's do. The stream that opens
// the object takes the telling over (OpenBy): it tells the cache, as any
// stream does, whether it read the object whole. An object dropped with no
// stream having opened it (its guessed parts evicted or left unused) tells
// the cache it was not read whole (Cache.ReadDone, false).
//
// Guesses are made under Engine.mu, where the cache is not called: the
// tells queue there and are delivered, in order, by the next reader to
// let go of the lock (deliver). A stream's own tells go straight to the
// cache from its reads and its Close, after what is queued.

// cacheTells queues the tells of guesses; its queue is guarded by
// Engine.mu.
type cacheTells struct {
	on    bool // the engine has a cache
	queue []cacheTell
	// undelivered counts the tells queued and not yet told to the cache,
	// those being told included: read without Engine.mu.
	undelivered atomic.Int64
	delivering  sync.Mutex // held while tells are delivered, so they keep their order; taken before Engine.mu
}

// cacheTell is one guess's news for the cache.
type cacheTell struct {
	obj   store.Object
	begun bool // true: a stream will read obj whole; false: none did
}

// guessLocked is told by nextShards that a guess makes o's first part.
// Called with Engine.mu held.
func (t *cacheTells) guessLocked(o *object) {
	if !t.on || o.wholeTold || o.streams > 0 {
		return
	}
	o.wholeTold = true
	t.queue = append(t.queue, cacheTell{obj: o.obj, begun: true})
	t.undelivered.Add(1)
}

// droppedLocked is told by the part table that it forgets o: a guess no
// stream took over ends here. Called with Engine.mu held.
func (t *cacheTells) droppedLocked(o *object) {
	if !o.wholeTold {
		return
	}
	o.wholeTold = false
	t.queue = append(t.queue, cacheTell{obj: o.obj})
	t.undelivered.Add(1)
}

// deliver tells c what guesses queued, and returns once every tell queued
// before it was called has been told, by it or by another deliver under
// way: a stream that took a guess over must not tell the cache how its
// read ended before the guess's telling is there. mu is Engine.mu, which
// guards the queue. The caller holds no lock; it costs one atomic load
// when nothing is queued.
func (t *cacheTells) deliver(mu *sync.Mutex, c Cache) {
	if t.undelivered.Load() == 0 {
		return
	}
	t.delivering.Lock()
	defer t.delivering.Unlock()
	mu.Lock()
	queue := t.queue
	t.queue = nil
	mu.Unlock()
	for _, tell := range queue {
		if tell.begun {
			c.ReadingWhole(tell.obj)
		} else {
			c.ReadDone(tell.obj, false)
		}
		t.undelivered.Add(-1)
	}
}
