package prefetch

// Lock order: a lock may be taken while holding the ones above it, never
// the ones below.
//
//	Reader.mu     a handle's stream: its creation and release (reader.go)
//	lastBlock.mu  a handle's kept cache block; the cache's locks inside
//	cacheTells.delivering  held while the guesses' tells go to the cache
//	              in order (tells.go); takes Engine.mu to take the queue
//	Engine.mu     the engine's one lock: the state of every owner below
//	arrival.mu    a part's arrived bytes (arrival.go); also taken alone
//	cache locks   Cache.Lookup, Room and ReadDone (which never waits) run
//	              under Engine.mu; Keep, ReadAt and a part's ring reads
//	              run outside it, from a GET's goroutine
//
// Engine.mu guards the state of each of these owners, a type each:
//
//	budget  budget.go      what live parts are charged, by class; their
//	                       buffers and the pool; the streams holding parts
//	                       and the reads waiting for room
//	parts   part.go        the part table: objects and their parts by
//	                       block, each part's holders, pins and state, the
//	                       parts not yet freed, failed ranges (failed.go)
//	gets    gets.go        GET slots and queues, the first-byte-first rule,
//	                       the parts being handed to the cache; not its
//	                       WaitGroup, nor the bytes a GET writes into buf
//	sched   schedule.go    the sample schedule: queues, the parts keeping
//	                       its ranges (schedread.go: reads of the others)
//	window  window.go      the open streams, and the parts each makes and
//	                       holds over its reads and ahead of them
//	next    nextshards.go  the listing order, openers' histories
//	                       (openers.go), hints, and the parts made for
//	                       objects not yet open
//	dense   denserest.go   the blocks random reads touched per object, the
//	                       objects whose rest is fetched in the background
//	Stream  stream.go      a stream's policy, held parts and held bytes
//	stats   stats.go       the Engine's own counters (ReadStats); the pool,
//	                       the schedule and the producers keep theirs
//	                       (Stats gathers them)
//
// Nothing calls back into the Engine while holding arrival.mu or a cache
// lock. Engine.mu is never held across a GET, a disk read or a copy of a
// part's bytes; lastBlock.mu, one handle's own, is held across the cache
// read that fills it, so the handle's parallel reads wait for that one.

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// Fetcher reads bytes of one object version. store.Store satisfies it; the
// semantics are those of store.Store.ReadRange.
type Fetcher interface {
	ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error)
}

// Cache is every call the engine makes on the cache; cache.Cache
// satisfies it. NewEngine's Cache may be nil: there is no cache, and
// fetched bytes are only served to the reads waiting for them.
//
// Keep gets every fetched range, from block index on, with the placement
// source.go chose for it; len(data) is a multiple of Config.BlockSize
// except for an object's last block. Keep copies what it keeps, so data is
// the engine's again once it returns, except that with own (data is one
// block and the whole of a buffer the engine gives up) it may keep data
// itself as its RAM copy: kept says so, and the buffer is never pooled.
// The reads check what they copy from the ring; one that answers false
// promises nothing about p. Keep and Summer are called from the goroutine
// that ran the GET; Lookup, Room and ReadDone with the engine's lock held,
// and must not call back.
type Cache interface {
	// Keep caches a fetched range where place says, checked by sums (above).
	Keep(obj store.Object, index int64, data []byte, sums cache.Sums, place cache.Placement, own bool) (kept bool)
	// Summer returns what sums a part's bytes as they arrive, for Keep, or nil.
	Summer(size int64) *cache.Summer
	// Lookup says which tiers hold a block.
	Lookup(obj store.Object, index int64) cache.Tier
	// Get returns a whole block from the first tier in from holding it, never written again.
	Get(obj store.Object, index int64, from cache.Tier) ([]byte, cache.Tier, bool)
	// ReadAt copies [off, off+len(p)) when all of it is cached, into RAM as place says.
	ReadAt(obj store.Object, p []byte, off int64, place cache.Placement) (n int, ok bool)
	// ReadChunks copies a read inside one block from RAM, or from only its ring grains.
	ReadChunks(obj store.Object, p []byte, off int64) (cache.Tier, bool)
	// ReadRAM copies a read inside one block that the RAM tier holds, and nothing else.
	ReadRAM(obj store.Object, p []byte, off int64) bool
	// Room is how many bytes of blocks it can keep at once.
	Room() int64
	// RAMFree is how many bytes the RAM tier takes before it evicts.
	RAMFree() int64
	// SharesRAM says the RAM tier reuses its slots: a block Get returns is a copy.
	SharesRAM() bool
	// ReadingWhole says a handle reads obj in order from its first byte: its whole file may begin.
	ReadingWhole(obj store.Object)
	// ReadDone says a handle reading obj closed, and whether it read obj whole; never waits.
	ReadDone(obj store.Object, whole bool)
}

// ErrClosed is returned by reads on a closed Stream or Engine.
var ErrClosed = errors.New("prefetch: closed")

// Engine runs the GETs of every Stream within one memory budget. It holds
// the owners of its state (the lock order above) and does what spans
// them: making, removing and freeing a part (part.go), eviction, which
// asks each owner for its victim (budget.go), and the composition of the
// read-ahead producers after a read (ahead.go). The schedule and the GET
// pool reach the rest only through the hooks NewEngine gives them, the
// producers through the part table, the budget and their hooks, and none
// reaches another; the part table and the budget reach nothing beyond
// what their callers pass them. GETs and Keep calls run outside mu, in
// the GET pool's goroutines.
type Engine struct {
	cfg   Config
	cache Cache // nil: none
	// sharedRAM: the cache's RAM tier reuses its slots (Cache.SharesRAM),
	// so a handle never keeps one of its blocks (readBlockwise).
	sharedRAM bool
	log       *slog.Logger

	mu     sync.Mutex
	closed bool
	budget budget
	parts  partTable
	gets   *getPool
	sched  schedule
	window window
	next   nextShards
	dense  denseRest
	stats  ReadStats
	tells  cacheTells // what next-shard guesses tell the cache (tells.go)
	// scheduled is set by the first sample schedule given, never reset:
	// until then a read does not look for a scheduled part (heldBySchedule).
	scheduled atomic.Bool

	// Test seams, run when a read starts to wait: for budget (under mu),
	// and for a part still on the network.
	onBudgetWait, onPartWait func()
}

// NewEngine starts an engine over the cache c, nil for none. cfg must be
// valid (check with Validate first); a nil log discards.
func NewEngine(cfg Config, f Fetcher, c Cache, log *slog.Logger) *Engine {
	if err := cfg.Validate(); err != nil {
		panic("prefetch: " + err.Error())
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Engine{
		cfg: cfg, cache: c, log: log,
		sharedRAM: c != nil && c.SharesRAM(),
		budget:    newBudget(cfg.Memory),
		parts:     newPartTable(cfg),
	}
	maker := maker{cfg: cfg, parts: &s.parts, budget: &s.budget, makerHooks: makerHooks{
		closed:  func() bool { return s.closed },
		source:  s.partSource,
		newPart: s.newPartLocked,
	}}
	s.window = window{maker: maker, streams: map[*Stream]struct{}{}, windowHooks: windowHooks{
		purpose: s.streamPurpose,
		hold:    s.holdLocked,
		drop:    s.dropLocked,
	}}
	s.tells.on = c != nil
	s.parts.dropped = s.tells.droppedLocked
	s.next = nextShards{maker: maker, guessWhole: s.tells.guessLocked}
	s.dense = denseRest{maker: maker, cache: c, access: map[objectID]*randomAccess{}}
	s.sched = newSchedule(cfg, c, scheduleHooks{
		closed:     func() bool { return s.closed },
		object:     s.parts.object,
		tidy:       s.parts.tidy,
		partAt:     s.parts.partAt,
		partSource: s.partSource,
		afford: func(size int64) bool {
			return s.budget.classFits(classSchedule, size, cfg.Memory/2) && s.gets.running < scheduleSlots(cfg.Concurrency)
		},
		newPart: s.newPartLocked,
		release: s.releaseIfUnusedLocked,
	})
	s.gets = newGetPool(cfg, f, c, &s.mu, getHooks{
		allocate: s.budget.allocate,
		failed:   s.parts.failure,
		ended:    s.getEndedLocked,
		release:  s.releaseIfUnusedLocked,
	})
	return s
}

// getEndedLocked is told by the GET pool that p's GET is over: the slot
// it frees may start a scheduled part, and a failed part is remembered
// (failed.go) and forgotten, so that the next read retries.
func (s *Engine) getEndedLocked(p *part, err error) {
	s.sched.pumpLocked() // a GET slot is free (scheduleSlots)
	if err == nil || p.live() {
		s.parts.failed.note(objectID{p.o.obj.Key, p.o.obj.ETag}, Range{p.off, p.end}, err, s.closed)
	}
	if err == nil {
		return
	}
	if p.live() {
		s.stats.Errors++
		s.log.Warn("prefetch: fetch failed", "key", p.o.obj.Key, "off", p.off, "end", p.end, "err", err)
		s.removeLocked(p)
	}
	s.freeLocked(p)
}

// Config returns the configuration in effect.
func (s *Engine) Config() Config { return s.cfg }

// Close cancels every GET, fails every waiting read with ErrClosed, and
// returns once no goroutine of the engine is left.
func (s *Engine) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.gets.closeLocked()
		for p := range s.parts.live {
			if p.live() {
				s.removeLocked(p)
			}
		}
		s.next.closeLocked()
		s.dense.closeLocked()
		s.sched.closeLocked()
		s.budget.notify()
	}
	s.mu.Unlock()
	s.gets.wait()
}

// SetOrder gives the listing order, in which a stream nearing the end of
// one object prefetches the start of the next ones. A listing is sorted by
// key; objs is kept, not copied (the caller never changes it), and an
// object is found in it by binary search: a million-key listing costs the
// engine 8 bytes a key, not a copy and a map.
//
// A new listing (every refresh) keeps when each key still listed was last
// opened: forgotten, every shard read so far in the pass would look
// unread, and the spill of the streams still reading would fetch them
// again.
func (s *Engine) SetOrder(objs []store.Object) {
	if !slices.IsSortedFunc(objs, byKey) {
		objs = slices.Clone(objs)
		slices.SortFunc(objs, byKey)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next.setOrderLocked(objs)
}

func byKey(a, b store.Object) int { return strings.Compare(a.Key, b.Key) }

// Hint queues the loader's schedule: the start of each object is
// prefetched, in order, as the budget allows. Objects already open or
// already prefetched are skipped.
func (s *Engine) Hint(objs ...store.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if dropped := s.next.hintLocked(objs); dropped > 0 {
		s.log.Debug("prefetch: hint schedule full, dropping the rest", "dropped", dropped)
	}
}

// Stats returns a snapshot of the counters.
func (s *Engine) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		ReadStats: s.stats, GetStats: s.gets.stats, ScheduleStats: s.sched.stats,
		NextStats: s.next.stats, DenseStats: s.dense.stats,
		InUseBytes:         s.budget.inUse,
		Streams:            int64(len(s.window.streams)),
		Running:            int64(s.gets.running),
		CacheFillers:       int64(s.gets.fillers),
		ScheduleQueued:     int64(s.sched.ranges - s.sched.unkept),
		ScheduleInUseBytes: s.budget.byClass[classSchedule],
	}
}
