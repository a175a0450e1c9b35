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

// cacheTells queues the tells of guesses; its slice is guarded by
// Engine.mu.
type cacheTells struct {
	queue   []cacheTell
	pending atomic.Bool // queue is not empty: read without Engine.mu
	deliver sync.Mutex  // held while tells are delivered, so they keep their order; taken before Engine.mu
}

// cacheTell is one guess's news for the cache.
type cacheTell struct {
	obj   store.Object
	begun bool // true: a stream will read obj whole; false: none did
}

// guessWholeLocked is told by nextShards that a guess makes o's first
// part.
func (s *Engine) guessWholeLocked(o *object) {
	if s.cache == nil || o.wholeTold || o.streams > 0 {
		return
	}
	o.wholeTold = true
	s.tells.queue = append(s.tells.queue, cacheTell{obj: o.obj, begun: true})
	s.tells.pending.Store(true)
}

// droppedLocked is told by the part table that it forgets o: a guess no
// stream took over ends here.
func (s *Engine) droppedLocked(o *object) {
	if !o.wholeTold {
		return
	}
	o.wholeTold = false
	s.tells.queue = append(s.tells.queue, cacheTell{obj: o.obj})
	s.tells.pending.Store(true)
}

// adoptWholeLocked makes st the teller of o's guess, if there is one.
func (s *Engine) adoptWholeLocked(st *Stream) {
	if st.o.wholeTold {
		st.o.wholeTold = false
		st.wholeFile = wholeFileAsked
	}
}

// deliverTells tells the cache what guesses queued. The caller holds no
// lock; it costs one atomic load when nothing is queued.
func (s *Engine) deliverTells() {
	if !s.tells.pending.Load() {
		return
	}
	s.tells.deliver.Lock()
	defer s.tells.deliver.Unlock()
	s.mu.Lock()
	queue := s.tells.queue
	s.tells.queue = nil
	s.tells.pending.Store(false)
	s.mu.Unlock()
	for _, t := range queue {
		if t.begun {
			s.cache.ReadingWhole(t.obj)
		} else {
			s.cache.ReadDone(t.obj, false)
		}
	}
}
