package prefetch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// registry is what the engine knows of objects, parts and streams.
// Guarded by Engine.mu.
type registry struct {
	objects  map[objectID]*object
	streams  map[*Stream]struct{}
	live     map[*part]struct{}         // every part whose budget is not yet released
	order    []store.Object             // the listing, sorted by key (indexOf)
	openedAt []uint64                   // by index in order: opens when it was last opened, 0 never
	opens    uint64                     // streams opened so far
	hints    []store.Object             // hinted objects not yet prefetched, in order
	spec     []*part                    // parts prefetched for objects not yet open, oldest first
	access   map[objectID]*randomAccess // blocks random reads touched, per object (dense.go)
	dense    []denseFetch               // objects whose rest is fetched in the background, in the order they turned dense
	failed   failedRanges               // ranges whose GET just failed (failed.go)
	openers  openers                    // the order each opener takes objects in (openers.go)
}

// denseFetch is the background fetch of the rest of an object that random
// reads use densely: parts are made from next on as the budget allows.
type denseFetch struct {
	obj  store.Object
	next int64
}

// objectID names one version of an object: parts of two versions never mix.
type objectID struct{ key, etag string }

// object is the registry of one object version's parts, present while it
// has parts or open streams.
type object struct {
	obj     store.Object
	parts   map[int64]*part // block index → the part covering that block
	streams int
	// claimedBy is the stream whose spill prefetches this object's start;
	// other streams' spills pass it over. Cleared when that stream closes.
	claimedBy *Stream
	// awaitingFirst counts GETs a read waits on that have yet to deliver
	// their first bytes; while there are any, this object's read-ahead
	// GETs wait in deferred, so that they do not compete with that first
	// response (on a loaded store the read-ahead's often came first).
	awaitingFirst int
	deferred      []*part
	// reads counts reads of this object by any stream. heads counts parts
	// whose head GET (Config.HeadSize) is running or over with the rest not
	// started; they defer read-ahead too, and those whose head is over wait
	// in parked, holding no GET slot, for the next read. A reader that
	// reads a file's first bytes and closes it costs one small GET.
	reads  uint64
	heads  int
	parked []*part
}

// part is one ranged GET: a run of whole blocks (the last may be short at
// the end of the object), never crossing a PartSize boundary.
type part struct {
	o        *object
	off, end int64
	size     int64 // budget charged: end-off rounded up to a block
	urgent   bool  // a read is waiting for it: first in line for a GET slot
	why      purpose
	// schedMade orders the schedule's parts for eviction; sched are the
	// scheduled ranges the part keeps until a read reaches them, whoever
	// made it.
	schedMade uint64
	sched     []schedRef
	settledAt time.Time // when a scheduled part's GET ended (scheduleHoldFor)
	// head, when not 0, is the size of a first GET for the read that made
	// the part (see Config.HeadSize); fetched is how many leading bytes
	// that GET brought once it is over. madeAtRead is the object's read
	// count when the part was made: the rest of the part is fetched once
	// the object is read again.
	head, fetched int64
	madeAtRead    uint64
	headPending   bool // the rest's GET has not started: counted in o.heads
	// fromRing: the ring held every block when the part was made, so it
	// is read from there; cleared if the ring then fails it.
	fromRing bool

	buf     []byte
	bufKept bool          // the cache kept buf as its RAM copy (keeper): never pooled
	sums    *cache.Summer // buf's checksums for the keeper, summed as bytes arrive; the GET's goroutine's
	arrived arrival       // leading bytes of buf that are final, before done
	done    chan struct{} // closed when err and buf are final
	err     error
	cancel  context.CancelFunc

	state         partState // see partstate.go
	awaitingFirst bool      // counted in o.awaitingFirst
	dying         bool      // removed while its GET ran: charged to Engine.dying until freed

	pins    int               // reads waiting on or copying from buf, and the Sink call
	holders map[*Stream]int64 // streams that want it → bytes each has read from it
}

func (p *part) String() string {
	return fmt.Sprintf("%s [%d, %d)", p.o.obj.Key, p.off, p.end)
}

// wanted reports whether an open stream, a read or a prefetch still wants p.
func (p *part) wanted() bool {
	if p.pins > 0 || p.why.speculative() || p.cacheInFlight() || len(p.sched) > 0 {
		return true
	}
	for st := range p.holders {
		if !st.closed {
			return true
		}
	}
	return false
}

// unused reports whether nothing keeps p: no stream, no read, no prefetch.
func (p *part) unused() bool {
	return len(p.holders) == 0 && p.pins == 0 && !p.why.speculative() && !p.cacheInFlight() && len(p.sched) == 0
}

// cacheInFlight reports whether p is kept until its bytes are in the
// cache and they have yet to reach it.
func (p *part) cacheInFlight() bool { return p.why.keptUntilCached() && !p.settled() }

func (s *Engine) objectLocked(obj store.Object) *object {
	id := objectID{obj.Key, obj.ETag}
	o := s.registry.objects[id]
	if o == nil {
		o = &object{obj: obj, parts: map[int64]*part{}}
		s.registry.objects[id] = o
	}
	return o
}

// tidyLocked forgets o once nothing refers to it.
func (s *Engine) tidyLocked(o *object) {
	if o.streams == 0 && len(o.parts) == 0 {
		delete(s.registry.objects, objectID{o.obj.Key, o.obj.ETag})
	}
}

func (s *Engine) partAt(o *object, off int64) *part { return o.parts[off/s.cfg.BlockSize] }

// failedLocked returns the error of a GET over r of obj that failed in the
// last failedRangeMemory, or nil (failed.go).
func (s *Engine) failedLocked(obj store.Object, r Range) error {
	if len(s.registry.failed.list) == 0 {
		return nil // the common case: no clock read on the read path
	}
	return s.registry.failed.find(objectID{obj.Key, obj.ETag}, r, time.Now())
}

// gapLocked returns the run of blocks from start (block-aligned) with no part,
// up to limit, stopping at the next part or PartSize boundary.
func (s *Engine) gapLocked(o *object, start, limit int64) Range {
	bs := s.cfg.BlockSize
	limit = min(limit, (start/s.cfg.PartSize+1)*s.cfg.PartSize, o.obj.Size)
	end := start
	for end < limit && o.parts[end/bs] == nil {
		end += bs
	}
	return Range{start, min(end, o.obj.Size)}
}

// newPartLocked registers a part over r, which must be a gap, made for
// why, charges the budget, and queues its GET. read is the read that
// waits on it, empty when none does. The caller has checked the budget.
func (s *Engine) newPartLocked(o *object, r, read Range, fromRing bool, why purpose) *part {
	urgent := !read.Empty()
	p := &part{
		o: o, off: r.Start, end: r.End, size: s.cfg.chargeOf(r), why: why,
		urgent: urgent, fromRing: fromRing,
		done: make(chan struct{}), holders: map[*Stream]int64{},
	}
	if h := s.cfg.HeadSize; urgent && !fromRing && h > 0 && read.Start >= r.Start && read.End-r.Start <= h && r.Len() > h {
		p.head, p.headPending, p.madeAtRead = h, true, o.reads
		o.heads++
	}
	for b := r.Start / s.cfg.BlockSize; b*s.cfg.BlockSize < r.End; b++ {
		o.parts[b] = p
	}
	s.registry.live[p] = struct{}{}
	s.budget.charge(why.class(), p.size)
	s.stats.PeakInUseBytes = max(s.stats.PeakInUseBytes, s.budget.inUse)
	if why.speculative() {
		s.registry.spec = append(s.registry.spec, p)
	}
	s.gets.enqueueLocked(p)
	return p
}

// removeLocked takes p out of the registry and away from everything that
// holds it; its GET is cancelled if still running, and its budget is
// released once no GET or read uses its buffer.
func (s *Engine) removeLocked(p *part) {
	if !p.live() {
		return
	}
	s.gets.restStartsLocked(p)
	for b := p.off / s.cfg.BlockSize; b*s.cfg.BlockSize < p.end; b++ {
		if p.o.parts[b] == p {
			delete(p.o.parts, b)
		}
	}
	for st := range p.holders {
		delete(st.held, p)
		s.addHeldLocked(st, -p.size)
	}
	clear(p.holders)
	s.unspecLocked(p)
	s.sched.dropPartLocked(p)
	switch p.state {
	case partQueued, partParked:
		p.err = ErrClosed
		close(p.done)
		s.stats.Cancelled++
	case partFetching:
		p.cancel()
		p.dying = true
		s.budget.dying += p.size
		s.stats.Cancelled++
	}
	p.to(evRemove)
	s.freeLocked(p)
	s.tidyLocked(p.o)
}

// freeLocked releases p's buffer and budget once it is removed and neither
// its GET nor any read uses the buffer.
func (s *Engine) freeLocked(p *part) {
	if p.state != partRemoved || p.pins > 0 {
		return
	}
	p.to(evFree)
	if p.buf != nil {
		s.budget.free(p.buf, p.size, p.bufKept) // a buffer the cache kept is its RAM copy now
		p.buf = nil
	}
	delete(s.registry.live, p)
	s.budget.charge(p.why.class(), -p.size)
	if p.dying {
		s.budget.dying -= p.size
	}
	s.budget.notify()
	s.pumpHintsLocked()
	s.pumpDenseLocked()
	s.sched.pumpLocked()
}

// releaseIfUnusedLocked removes p when nothing keeps it any more.
func (s *Engine) releaseIfUnusedLocked(p *part) {
	if p.live() && p.unused() {
		s.removeLocked(p)
	}
	s.freeLocked(p)
}

// holdLocked makes st a holder of p, adopting it if it was prefetched for
// an object nobody had open.
func (s *Engine) holdLocked(st *Stream, p *part) {
	if _, ok := p.holders[st]; ok {
		return
	}
	p.holders[st] = 0
	st.held[p] = struct{}{}
	s.addHeldLocked(st, p.size)
	s.unspecLocked(p)
}

// dropLocked ends st's interest in p.
func (s *Engine) dropLocked(st *Stream, p *part) {
	if _, ok := p.holders[st]; !ok {
		return
	}
	delete(p.holders, st)
	delete(st.held, p)
	s.addHeldLocked(st, -p.size)
	s.releaseIfUnusedLocked(p)
}

func (s *Engine) addHeldLocked(st *Stream, delta int64) {
	before := st.heldBytes
	st.heldBytes += delta
	switch {
	case before == 0 && st.heldBytes > 0:
		s.budget.holding++
	case before > 0 && st.heldBytes == 0:
		s.budget.holding--
	}
}

// unspecLocked makes a part prefetched for an object nobody had open the
// read-ahead of the stream that now holds it.
func (s *Engine) unspecLocked(p *part) {
	if !p.why.speculative() {
		return
	}
	s.budget.charge(p.why.class(), -p.size)
	p.why = forWindow
	s.budget.charge(p.why.class(), p.size)
	if i := slices.Index(s.registry.spec, p); i >= 0 {
		s.registry.spec = slices.Delete(s.registry.spec, i, i+1)
	}
}
