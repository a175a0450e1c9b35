package prefetch

import (
	"context"
	"fmt"
	"time"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// partTable is the part table: every object version with parts or open
// streams, its parts by block index, the streams holding each part, the
// parts not yet freed, and the ranges whose GET just failed (failed.go). It is the only code that
// creates a part or takes one out of its object. It charges no budget
// itself: its callers pass what moves a charge. Guarded by Engine.mu.
type partTable struct {
	cfg     Config
	objects map[objectID]*object
	live    map[*part]struct{} // every part whose budget is not yet released
	failed  failedRanges       // ranges whose GET just failed (failed.go)
	dropped func(o *object)    // called as tidy forgets o (cacheTells.droppedLocked)
}

func newPartTable(cfg Config) partTable {
	return partTable{cfg: cfg, objects: map[objectID]*object{}, live: map[*part]struct{}{}}
}

// objectID names one version of an object: parts of two versions never mix.
type objectID struct{ key, etag string }

// object is the part table's entry for one object version, present while it
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
	// chunks records the chunk reads of an object larger than the cache
	// (exact.go); nil until its first.
	chunks *chunkReads
	// readWhole: a closed stream read the object whole; the cache hears
	// of it once the object has no part left (Engine.readWhole).
	readWhole bool
	// wholeTold: next-shard read-ahead told the cache that a stream will
	// read the object whole (tells.go); the stream that opens it takes
	// that over, and an object dropped unopened tells the cache it was not.
	wholeTold bool
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
	restNeeded    bool // a read waits on bytes past the head (getPool.needRestLocked)
	// fromRing: the ring held every block when the part was made, so it
	// is read from there; cleared if the ring then fails it.
	fromRing bool

	buf     []byte
	bufKept bool          // the cache kept buf as its RAM copy (Cache.Keep): never pooled
	sums    *cache.Summer // buf's checksums for Cache.Keep, summed as bytes arrive; the GET's goroutine's
	arrived arrival       // leading bytes of buf that are final, before done
	done    chan struct{} // closed when err and buf are final
	err     error
	cancel  context.CancelFunc

	state         partState // see partstate.go
	awaitingFirst bool      // counted in o.awaitingFirst
	dying         bool      // removed while its GET ran: charged to budget.dying until freed

	served  int64             // bytes reads took from buf, summed over reads (Stats.Unread)
	pins    int               // reads waiting on or copying from buf, and the Keep call
	sinking bool              // the Keep call runs
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

// object returns the entry of obj, made when absent.
func (t *partTable) object(obj store.Object) *object {
	id := objectID{obj.Key, obj.ETag}
	o := t.objects[id]
	if o == nil {
		o = &object{obj: obj, parts: map[int64]*part{}}
		t.objects[id] = o
	}
	return o
}

// find returns the entry of obj, nil when it has none.
func (t *partTable) find(obj store.Object) *object { return t.objects[objectID{obj.Key, obj.ETag}] }

// tidy forgets o once nothing refers to it.
func (t *partTable) tidy(o *object) {
	if o.streams == 0 && len(o.parts) == 0 {
		if t.dropped != nil {
			t.dropped(o)
		}
		delete(t.objects, objectID{o.obj.Key, o.obj.ETag})
	}
}

// partAt is the part covering the byte at off of o, nil when none.
func (t *partTable) partAt(o *object, off int64) *part { return o.parts[off/t.cfg.BlockSize] }

// extent is how far from 0 the parts of o reach without a gap.
func (t *partTable) extent(o *object) int64 {
	var end int64
	for p := t.partAt(o, 0); p != nil && end < o.obj.Size; p = t.partAt(o, end) {
		end = p.end
	}
	return end
}

// failure returns the error of a GET over r of obj that failed in the
// last failedRangeMemory, or nil (failed.go).
func (t *partTable) failure(obj store.Object, r Range) error {
	if len(t.failed.list) == 0 {
		return nil // the common case: no clock read on the read path
	}
	return t.failed.find(objectID{obj.Key, obj.ETag}, r, time.Now())
}

// gap returns the run of blocks from start (block-aligned) with no part,
// up to limit, stopping at the next part or PartSize boundary.
func (t *partTable) gap(o *object, start, limit int64) Range {
	bs := t.cfg.BlockSize
	limit = min(limit, (start/t.cfg.PartSize+1)*t.cfg.PartSize, o.obj.Size)
	end := start
	for end < limit && o.parts[end/bs] == nil {
		end += bs
	}
	return Range{start, min(end, o.obj.Size)}
}

// add makes a part over r, which must be a gap, for why and enters it in
// the table; read is the read that waits on it, empty when none does. A
// read of only the first HeadSize bytes of a larger part gets a head GET
// first (Config.HeadSize).
func (t *partTable) add(o *object, r, read Range, fromRing bool, why purpose) *part {
	urgent := !read.Empty()
	p := &part{
		o: o, off: r.Start, end: r.End, size: t.cfg.chargeOf(r), why: why,
		urgent: urgent, fromRing: fromRing,
		done: make(chan struct{}), holders: map[*Stream]int64{},
	}
	if h := t.cfg.HeadSize; urgent && !fromRing && h > 0 && read.Start >= r.Start && read.End-r.Start <= h && r.Len() > h {
		p.head, p.headPending, p.madeAtRead = h, true, o.reads
		o.heads++
	}
	for b := r.Start / t.cfg.BlockSize; b*t.cfg.BlockSize < r.End; b++ {
		o.parts[b] = p
	}
	t.live[p] = struct{}{}
	return p
}

// unlink takes p out of its object's blocks and away from every stream
// holding it; held moves each stream's held bytes (budget.addHeld).
func (t *partTable) unlink(p *part, held func(heldBytes *int64, delta int64)) {
	for b := p.off / t.cfg.BlockSize; b*t.cfg.BlockSize < p.end; b++ {
		if p.o.parts[b] == p {
			delete(p.o.parts, b)
		}
	}
	for st := range p.holders {
		delete(st.held, p)
		held(&st.heldBytes, -p.size)
	}
	clear(p.holders)
}

// forget drops p, freed, from the parts not yet released.
func (t *partTable) forget(p *part) { delete(t.live, p) }

// hold makes st a holder of p and reports whether it was not one yet;
// held moves st's held bytes (budget.addHeld).
func (t *partTable) hold(st *Stream, p *part, held func(heldBytes *int64, delta int64)) bool {
	if _, ok := p.holders[st]; ok {
		return false
	}
	p.holders[st] = 0
	st.held[p] = struct{}{}
	held(&st.heldBytes, p.size)
	return true
}

// drop ends st's interest in p and reports whether it had one; held moves
// st's held bytes (budget.addHeld).
func (t *partTable) drop(st *Stream, p *part, held func(heldBytes *int64, delta int64)) bool {
	if _, ok := p.holders[st]; !ok {
		return false
	}
	delete(p.holders, st)
	delete(st.held, p)
	held(&st.heldBytes, -p.size)
	return true
}

// unclaim clears the claims st's spill made on the starts of objects.
func (t *partTable) unclaim(st *Stream) {
	for _, o := range t.objects {
		if o.claimedBy == st {
			o.claimedBy = nil
		}
	}
}

// newPartLocked makes a part over r, which must be a gap, for why, charges
// the budget, and queues its GET. read is the read that waits on it, empty
// when none does. The caller has checked the budget.
func (s *Engine) newPartLocked(o *object, r, read Range, fromRing bool, why purpose) *part {
	p := s.parts.add(o, r, read, fromRing, why)
	s.budget.charge(why.class(), p.size)
	s.stats.PeakInUseBytes = max(s.stats.PeakInUseBytes, s.budget.inUse)
	s.gets.enqueueLocked(p)
	return p
}

// removeLocked takes p out of the part table and away from everything that
// holds it; its GET is cancelled if still running, and its budget is
// released once no GET or read uses its buffer.
func (s *Engine) removeLocked(p *part) {
	if !p.live() {
		return
	}
	s.gets.restStartsLocked(p)
	s.parts.unlink(p, s.budget.addHeld)
	s.tellReadWholeLocked(p.o)
	s.next.unspecLocked(p)
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
	s.parts.tidy(p.o)
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
	s.parts.forget(p)
	s.stats.Unread[p.why] += p.unread()
	s.budget.charge(p.why.class(), -p.size)
	if p.dying {
		s.budget.dying -= p.size
	}
	s.budget.notify()
	// Room is free: each producer that waited for it goes on.
	s.next.pumpHintsLocked()
	s.dense.pumpLocked()
	s.sched.pumpLocked()
}

// releaseIfUnusedLocked removes p when nothing keeps it any more.
func (s *Engine) releaseIfUnusedLocked(p *part) {
	if p.live() && p.unused() {
		s.removeLocked(p)
	}
	s.freeLocked(p)
	s.tellReadWholeLocked(p.o) // the GET pool lets a part go here once its bytes are in the cache
}

// holdLocked makes st a holder of p, adopting it if it was prefetched for
// an object nobody had open (nextShards.unspecLocked).
func (s *Engine) holdLocked(st *Stream, p *part) {
	if s.parts.hold(st, p, s.budget.addHeld) {
		s.next.unspecLocked(p)
	}
}

// dropLocked ends st's interest in p, which goes when nothing else keeps it.
func (s *Engine) dropLocked(st *Stream, p *part) {
	if s.parts.drop(st, p, s.budget.addHeld) {
		s.releaseIfUnusedLocked(p)
	}
}

// unread is what p fetched from the store that no read took: none for a
// part read from the ring, or a chunk's, lent to the page cache.
func (p *part) unread() int64 {
	if p.fromRing || p.why == forChunk {
		return 0
	}
	return max(0, p.arrived.final()-p.served)
}
