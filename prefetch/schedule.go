package prefetch

import (
	"slices"
	"time"

	"github.com/shardfs/shardfs/store"
)

// The sample schedule: the exact byte ranges a loader will read next, in
// the order it will read them (a map-style epoch: one range per sample, in
// the sampler's permutation). Each writer (an owner: the process that
// wrote the ranges) has its own queue; the queues are served in turn.
//
//   - Coalescing. A range that touches or overlaps the blocks of the
//     owner's previous range in the same object, within one PartSize
//     part, joins it (coalesce): neighbouring samples cost one GET.
//   - Fetching. pumpLocked makes the parts of queued ranges in
//     order while parts made for the schedule take at most half the
//     budget, at most half the GET slots run (scheduleSlots) and no read
//     waits for budget: a window ahead of the reader,
//     as wide as that half. Blocks the RAM tier holds get no part: reads
//     find them there. Blocks only the ring holds are read from there
//     into the part (partSource), so that the part holds every byte of
//     its ranges until they are read.
//   - Freeing. A part keeps the scheduled ranges it covers (part.sched)
//     until a read (served from the part or from the cache) overlaps each
//     of them; then nothing keeps it for the schedule. Its bytes went to
//     the RAM tier and ring as they arrived (purpose.placement), where a
//     sample's neighbours in the same block are found later. A part over
//     an object small next to the budget (widensLocked) keeps no range:
//     it goes once its bytes are in the cache (forScheduleWhole), like the density
//     rule's. Ranges no part keeps (those, and those whose blocks the RAM
//     tier held) wait in their owner's unkept list, and a range the reader
//     got to while it was still queued is read there (schedread.go): both
//     are the schedule's until read.
//   - Bounds. At most MaxScheduledRanges ranges are queued, kept by
//     parts or unkept, across maxScheduleOwners owners; past that ranges are refused
//     and counted. Ranges the reader has gone past (an owner's range
//     scheduleReorder later was read) are dropped from the queue and,
//     once their GET is over, from the parts, and a part made for
//     the schedule is let go scheduleHoldFor after it arrived, read or
//     not, so ranges never read cannot keep the window full; a read
//     waiting for budget may evict a scheduled part no read is using, as
//     it evicts prefetch.
//
// Served bytes come through source.go like any other read: a read inside
// a scheduled part is answered from the part (heldBySchedule), before the
// cache tiers are looked at.

// Scheduled is one range of a loader's schedule: [Off, Off+Len) of Obj,
// which the caller has checked lies inside the object.
type Scheduled struct {
	Obj      store.Object
	Off, Len int64
}

// ScheduleResult says what Schedule did with the ranges it was given.
type ScheduleResult struct {
	Queued      int // ranges queued, alone or joined to their neighbour
	Overlapping int // ranges overlapping the owner's previous one: only their new bytes are queued
	Full        int // ranges refused: the schedule held MaxScheduledRanges, or maxScheduleOwners owners
	// The index of the first overlapping and first refused range, -1
	// when none: an example for the log.
	FirstOverlapping, FirstFull int
}

// MaxScheduledRanges bounds the ranges queued across every owner (about
// 100 bytes each: at most some 6 MiB of queue whatever a loader writes).
const MaxScheduledRanges = 1 << 16

// maxScheduleOwners bounds the owners with a queue: a queue is kept while
// its ranges are queued or held, so a new owner past the bound is refused
// until one empties.
const maxScheduleOwners = 1024

// schedule is the sample schedule: its owners' queues, the parts that
// keep its ranges, and its counters. It makes, keeps and lets go of parts
// through its hooks, never through the engine's fields. Guarded by
// Engine.mu, which its hooks are called with.
type schedule struct {
	cfg     Config
	cache   Cache // nil when there is none: no part is widened (widensLocked)
	owners  map[uint64]*scheduleQueue
	turn    []uint64         // owners with queued ranges, served in turn from turn[0]
	queued  int              // entries in every queue
	ranges  int              // ranges queued, plus ranges held by parts (one per part holding it), plus unkept: at most MaxScheduledRanges
	unkept  int              // ranges in the owners' unkept lists (schedread.go)
	objects map[objectID]int // ranges counts per object
	parts   map[*part]struct{}
	made    uint64 // parts made so far, for eviction order
	pumping bool   // pumpLocked is running: a nested call leaves the work to it
	again   bool   // a nested call asked for another pass
	// moved counts reads that moved an owner on since the last sweep of
	// passed ranges (dropPassedLocked); sweep asks for one at the next pump.
	moved int
	sweep bool

	stats ScheduleStats

	scheduleHooks
}

// scheduleHooks are what the schedule asks of the rest of the engine, each
// called with Engine.mu held.
type scheduleHooks struct {
	closed func() bool
	// object returns the part table's entry for obj, made when absent;
	// tidy forgets it once nothing refers to it.
	object func(obj store.Object) *object
	tidy   func(o *object)
	// partAt is the part covering the byte at off of o, nil when none.
	partAt func(o *object, off int64) *part
	// partSource is the run of blocks of o from start, up to limit, that
	// no part covers, cut where the cache starts or stops holding them,
	// and whether it is read from the ring (source.go).
	partSource func(o *object, start, limit int64, readAhead bool) (r Range, fromRing bool)
	// afford reports whether a part of size bytes may be made for the
	// schedule now: its parts within half the budget, its GETs within
	// half the slots (scheduleSlots), and no read waiting for budget.
	afford func(size int64) bool
	// newPart makes a part over r, charges it and queues its GET.
	newPart func(o *object, r, read Range, fromRing bool, why purpose) *part
	// release lets p go once nothing keeps it.
	release func(p *part)
}

func newSchedule(cfg Config, cache Cache, hooks scheduleHooks) schedule {
	return schedule{
		cfg: cfg, cache: cache, scheduleHooks: hooks,
		owners: map[uint64]*scheduleQueue{}, parts: map[*part]struct{}{}, objects: map[objectID]int{},
	}
}

// closeLocked forgets every queue: the engine closed, and every part went.
func (sc *schedule) closeLocked() {
	sc.turn, sc.queued, sc.ranges, sc.unkept = nil, 0, 0, 0
	clear(sc.owners)
	clear(sc.objects)
}

// scheduleQueue is one owner's queued ranges and how far it has read.
type scheduleQueue struct {
	entries []schedEntry
	last    Range // the range written last, before trimming: overlap is with it
	lastID  objectID
	nextSeq uint64
	readTo  uint64 // seq of the newest range a read reached, plus one
	held    int    // refs of this owner held by parts
	// unkept are the owner's placed ranges no part keeps, in order,
	// until a read reaches them (schedread.go); active is when the owner
	// last scheduled ranges or a read reached one.
	unkept []unkeptRef
	active time.Time
}

// schedEntry is a run of coalesced ranges of one object, fetched together.
type schedEntry struct {
	obj     store.Object
	span    Range // the blocks of refs, block-aligned (the last block may end at the object's end)
	next    int64 // where placing the entry's parts resumes
	started bool  // placing began: span and next are the parts'
	refs    []schedRef
}

// schedRef is one range as the loader scheduled it. left counts the bytes
// of it no read has reached: of the whole range while queued or unkept, of
// the part's share in a part keeping it. In an entry, kept says that a
// part was given it to keep.
type schedRef struct {
	owner, seq uint64
	r          Range
	left       int64
	kept       bool
}

// overlap is how many bytes a and b share.
func overlap(a, b Range) int64 { return max(min(a.End, b.End)-max(a.Start, b.Start), 0) }

// countRangesLocked adds n to the ranges queued or kept, in all and for
// obj. An object stays named, at zero, until the whole schedule is spent.
func (sc *schedule) countRangesLocked(obj store.Object, n int) {
	sc.ranges += n
	id := objectID{obj.Key, obj.ETag}
	sc.objects[id] = max(sc.objects[id]+n, 0)
	if sc.ranges <= 0 {
		clear(sc.objects)
	}
}

// namesLocked reports whether the schedule in force names ranges of o:
// its reads are the schedule's, and neither read-ahead nor the density
// rule guesses what comes after them. That holds until the schedule is
// spent, not only while ranges of o are queued or kept: a late sample of
// an object whose other samples were read already (its range let go as
// passed, or its part gone) is still the loader's, and turned the object
// dense at the end of an epoch.
func (sc *schedule) namesLocked(o *object) bool {
	_, named := sc.objects[objectID{o.obj.Key, o.obj.ETag}]
	return named
}

// scheduleReorder is how far out of order an owner's ranges may be read
// and still count as in order: DataLoader workers read their samples in
// parallel, several batches each in flight. A range is passed once a
// range this many later was read.
const scheduleReorder = 256

// passed reports whether the owner has read far enough past ref that it
// will not be read soon.
func (q *scheduleQueue) passed(ref schedRef) bool { return ref.seq+scheduleReorder < q.readTo }

// blocksOf is r widened to whole blocks.
func blocksOf(r Range, bs int64) Range {
	return Range{r.Start / bs * bs, ceilTo(r.End, bs)}
}

// coalesce reports whether a range whose blocks are b joins the entry
// whose blocks are span: they touch or overlap and together lie inside one
// PartSize-aligned part. It returns the joined span.
func coalesce(span, b Range, partSize int64) (Range, bool) {
	if b.Start > span.End || b.End < span.Start {
		return span, false
	}
	u := Range{min(span.Start, b.Start), max(span.End, b.End)}
	if u.Start/partSize != (u.End-1)/partSize {
		return span, false
	}
	return u, true
}

// trimOverlap takes off r what overlaps prev (the owner's previous range
// of the same object). It reports whether they overlapped; r comes back
// empty when prev covers it.
func trimOverlap(prev, r Range) (Range, bool) {
	if r.Start >= prev.End || r.End <= prev.Start {
		return r, false
	}
	switch {
	case r.Start >= prev.Start && r.End <= prev.End:
		return Range{r.Start, r.Start}, true
	case r.Start < prev.Start:
		return Range{r.Start, prev.Start}, true
	default:
		return Range{prev.End, r.End}, true
	}
}

// Schedule queues ranges owner will read, in that order, and starts
// fetching them as the budget allows.
func (s *Engine) Schedule(owner uint64, ranges []Scheduled) ScheduleResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ScheduleResult{FirstOverlapping: -1, FirstFull: -1}
	}
	s.scheduled.Store(true)
	return s.sched.addLocked(owner, ranges)
}

// addLocked queues ranges for owner (Schedule).
func (sc *schedule) addLocked(owner uint64, ranges []Scheduled) ScheduleResult {
	res := ScheduleResult{FirstOverlapping: -1, FirstFull: -1}
	full := func(i int) {
		if res.Full == 0 {
			res.FirstFull = i
		}
		res.Full++
	}
	q := sc.owners[owner]
	for i, sr := range ranges {
		r := Range{sr.Off, min(sr.Off+sr.Len, sr.Obj.Size)}
		if r.Empty() || sr.Off < 0 {
			continue
		}
		if q == nil {
			if len(sc.owners) >= maxScheduleOwners {
				full(i)
				continue
			}
			q = &scheduleQueue{}
			sc.owners[owner] = q
		}
		if sc.ranges >= MaxScheduledRanges {
			full(i)
			continue
		}
		id := objectID{sr.Obj.Key, sr.Obj.ETag}
		prev, sameObject := q.last, id == q.lastID
		q.last, q.lastID = r, id
		if sameObject {
			var overlapped bool
			if r, overlapped = trimOverlap(prev, r); overlapped {
				if res.Overlapping == 0 {
					res.FirstOverlapping = i
				}
				res.Overlapping++
				if r.Empty() {
					continue
				}
			}
		}
		ref := schedRef{owner: owner, seq: q.nextSeq, r: r, left: r.Len()}
		q.nextSeq++
		res.Queued++
		sc.countRangesLocked(sr.Obj, 1)
		b := blocksOf(r, sc.cfg.BlockSize)
		// Join the previous entry when it is of the same object and its
		// parts are still to be made: a placed entry's span no longer grows.
		if n := len(q.entries); n > 0 && (objectID{q.entries[n-1].obj.Key, q.entries[n-1].obj.ETag}) == id && q.entries[n-1].next == q.entries[n-1].span.Start {
			if span, ok := coalesce(q.entries[n-1].span, b, sc.cfg.PartSize); ok {
				e := &q.entries[n-1]
				e.span, e.next = span, span.Start
				e.refs = append(e.refs, ref)
				continue
			}
		}
		if len(q.entries) == 0 {
			sc.turn = append(sc.turn, owner)
		}
		q.entries = append(q.entries, schedEntry{obj: sr.Obj, span: b, next: b.Start, refs: []schedRef{ref}})
		sc.queued++
	}
	if q != nil {
		q.active = time.Now()
	}
	sc.stats.ScheduledRanges += int64(res.Queued)
	sc.sweep = true // and parts held past scheduleHoldFor go
	sc.pumpLocked()
	return res
}

// pumpLocked makes the parts of queued ranges, one entry per owner
// in turn, while the schedule's parts take at most half the budget and no
// read waits for budget.
func (sc *schedule) pumpLocked() {
	if sc.pumping {
		sc.again = true
		return
	}
	sc.pumping = true
	defer func() { sc.pumping = false }()
	for pass := true; pass; {
		sc.again = false
		if sc.sweep || sc.moved >= scheduleSweepEvery {
			sc.dropPassedLocked()
		}
		for len(sc.turn) > 0 && !sc.closed() {
			owner := sc.turn[0]
			q := sc.owners[owner]
			e := &q.entries[0]
			if q.passed(e.refs[len(e.refs)-1]) { // the reader went past all of it
				sc.stats.ScheduleSkipped += int64(len(e.refs))
			} else if !sc.placeLocked(e) {
				if sc.moved == 0 {
					break
				}
				sc.dropPassedLocked() // the room may be held for ranges read past
				continue
			} else {
				sc.leaveUnkeptLocked(q, e) // placed: what no part keeps waits for its read
			}
			sc.countRangesLocked(e.obj, -len(e.refs))
			q.entries[0] = schedEntry{}
			q.entries = q.entries[1:]
			sc.queued--
			sc.turn = sc.turn[1:]
			if len(q.entries) > 0 {
				sc.turn = append(sc.turn, owner)
			}
			sc.forgetOwnerLocked(owner)
		}
		pass = sc.again && !sc.closed()
	}
}

// scheduleSlots is how many GETs may run when the schedule starts
// another: half the slots, the rest left to reads and the density rule.
// A schedule's first window would otherwise start all of them at once,
// more than the density rule ever has out: more buffers and streams in
// flight for the same bytes, so more CPU per byte; a GET that ends lets
// the schedule start the next (get).
func scheduleSlots(concurrency int) int { return max(concurrency/2, 1) }

// placeLocked makes the parts of e's blocks that have none, or gives the
// parts there e's ranges to keep, and reports whether all of e is placed.
func (sc *schedule) placeLocked(e *schedEntry) bool {
	o := sc.object(e.obj)
	defer sc.tidy(o)
	e.started = true
	bs := sc.cfg.BlockSize
	end := min(e.span.End, e.obj.Size)
	whole := sc.widensLocked(o)
	if whole {
		// The whole PartSize part the entry lies in (coalesce keeps it in
		// one): a GET from the part's start, not from the range's block
		// with the blocks before it left to a GET of their own.
		ps := sc.cfg.PartSize
		if e.next == e.span.Start {
			e.next = e.span.Start / ps * ps
		}
		end = min(ceilTo(e.span.End, ps), e.obj.Size)
	}
	for e.next < end {
		if p := sc.partAt(o, e.next); p != nil {
			if !whole {
				sc.keepLocked(p, e.refs)
			}
			e.next = p.end
			continue
		}
		// Blocks the RAM tier holds are left there: the read finds them
		// (source.go step 1), and a part would copy each again, for every
		// range of the block scheduled after the last part over it went.
		// Blocks only the ring holds are read from it into the part, like
		// blocks fetched: the range's own blocks, kept until it is read,
		// or, for a small object, its whole part, into the RAM tier.
		gap, cached := sc.partSource(o, e.next, end, true)
		if gap.Empty() {
			e.next = gap.End + bs
			continue
		}
		if cached && whole && sc.cache.RAMFree() < gap.Len() {
			// A part let go once read from the ring would leave nothing
			// behind: the RAM tier has no room for it. Reads find these
			// blocks in the ring.
			e.next = gap.End
			continue
		}
		if !sc.afford(sc.cfg.chargeOf(gap)) {
			return false
		}
		why := forSchedule
		if whole {
			why = forScheduleWhole
		}
		p := sc.newPart(o, gap, Range{}, cached, why)
		sc.made++
		sc.stats.ScheduleParts++
		p.schedMade = sc.made
		if !whole {
			sc.keepLocked(p, e.refs)
		}
		e.next = gap.End
	}
	return true
}

// widensLocked reports whether a part made for a schedule of o runs on to
// the end of its PartSize part rather than stopping after the range: o is
// small next to the budget (the density rule's smallObjectDivisor), so a
// schedule over it (an epoch) reads all of it, and the rest of the part is
// one GET now rather than one a sample later. The bytes past the range go
// to the cache (purpose.placement), where the ranges after it find them; with
// no cache they would be dropped, and the part stops after the range.
//
// Such a part keeps no scheduled range (forScheduleWhole): it goes once its bytes
// are in the cache, as the density rule's parts do. Kept until every
// range over it was read, a part of a shuffled epoch stayed for most of
// the epoch (its 8 MiB hold samples from every window), the window filled
// with such parts, and the schedule stopped fetching while reads of the
// parts it had not made went to the store one block at a time.
func (sc *schedule) widensLocked(o *object) bool {
	return sc.cache != nil && o.obj.Size <= sc.cfg.Memory/smallObjectDivisor
}

// keepLocked has p keep the refs that overlap it until read,
// and marks them kept.
func (sc *schedule) keepLocked(p *part, refs []schedRef) {
	for i, ref := range refs {
		kept := slices.ContainsFunc(p.sched, func(k schedRef) bool { return k.owner == ref.owner && k.seq == ref.seq })
		if ref.left = overlap(ref.r, Range{p.off, p.end}); ref.left > 0 && !kept {
			refs[i].kept = true
			p.sched = append(p.sched, ref)
			sc.owners[ref.owner].held++
			sc.countRangesLocked(p.o.obj, 1)
		}
	}
	if len(p.sched) > 0 {
		sc.parts[p] = struct{}{}
	}
}

// consumeLocked records a read of r from p: the scheduled ranges
// it reaches the last unread bytes of are read, their owners have read
// that far, and p is let go when nothing else keeps it. (A large sample
// comes in several reads, in any order: the part stays for all of them.)
func (sc *schedule) consumeLocked(p *part, r Range) {
	if len(p.sched) == 0 || r.Empty() {
		return
	}
	passed := false
	var owners []uint64
	for i := range p.sched {
		p.sched[i].left -= overlap(p.sched[i].r, r)
	}
	p.sched = slices.DeleteFunc(p.sched, func(ref schedRef) bool {
		if ref.left > 0 {
			return false
		}
		q := sc.owners[ref.owner]
		q.held--
		owners = append(owners, ref.owner)
		passed = sc.rangeReadLocked(q, p.o.obj, ref) || passed
		return true
	})
	sc.stats.ScheduleRead += int64(len(owners))
	if passed {
		sc.moved++
		sc.pumpLocked() // fills the room, dropping what the reader went past when it must
	}
	sc.releaseLocked(p)
	for _, owner := range owners {
		sc.forgetOwnerLocked(owner)
	}
}

// scheduleSweepEvery is how many reads that move an owner on may pass
// before the parts are swept for ranges read past (dropPassedLocked, which
// looks at every range every part keeps): sooner when the window is full
// or a schedule arrives. A range is passed only scheduleReorder ranges
// late, so a sweep a few dozen reads later frees it all the same.
const scheduleSweepEvery = 64

// scheduleHoldFor is how long a part made for a schedule is kept, once
// arrived, for ranges nobody reads: a loader that stopped (an epoch cut
// short, a process gone) must not hold the schedule's window for ever. Its
// bytes stay in the cache; the next schedule event lets it go.
const scheduleHoldFor = 30 * time.Second

// dropPassedLocked drops, from the parts that keep them and from the
// unkept lists, the ranges their owner has read past without reading them
// (they will not be read soon), the ranges of scheduled parts that arrived
// scheduleHoldFor ago, and the unkept ranges of owners idle that long.
func (sc *schedule) dropPassedLocked() {
	sc.moved, sc.sweep = 0, false
	var freed []*part
	var owners []uint64
	now := time.Now()
	for p := range sc.parts {
		if !p.settled() {
			continue // its GET runs: cancelling it would waste what it fetched
		}
		expired := p.why.scheduled() && !p.settledAt.IsZero() && now.Sub(p.settledAt) > scheduleHoldFor
		p.sched = slices.DeleteFunc(p.sched, func(ref schedRef) bool {
			q := sc.owners[ref.owner]
			if !q.passed(ref) && !expired {
				return false
			}
			q.held--
			sc.countRangesLocked(p.o.obj, -1)
			owners = append(owners, ref.owner)
			sc.stats.ScheduleSkipped++
			return true
		})
		if len(p.sched) == 0 {
			freed = append(freed, p)
		}
	}
	for _, p := range freed {
		sc.releaseLocked(p)
	}
	for owner, q := range sc.owners {
		if sc.dropUnkeptLocked(q, now) {
			owners = append(owners, owner)
		}
	}
	for _, owner := range owners {
		sc.forgetOwnerLocked(owner)
	}
}

// releaseLocked lets p go once it keeps no scheduled range.
func (sc *schedule) releaseLocked(p *part) {
	if len(p.sched) > 0 {
		return
	}
	delete(sc.parts, p)
	sc.release(p)
}

// dropPartLocked forgets the ranges p keeps: it is being removed.
func (sc *schedule) dropPartLocked(p *part) {
	for _, ref := range p.sched {
		if q := sc.owners[ref.owner]; q != nil {
			q.held--
			sc.countRangesLocked(p.o.obj, -1)
		}
	}
	owners := p.sched
	p.sched = nil
	delete(sc.parts, p)
	for _, ref := range owners {
		sc.forgetOwnerLocked(ref.owner)
	}
}

// forgetOwnerLocked drops owner's queue once it has nothing queued or held.
func (sc *schedule) forgetOwnerLocked(owner uint64) {
	if q := sc.owners[owner]; q != nil && len(q.entries) == 0 && q.held == 0 && len(q.unkept) == 0 {
		delete(sc.owners, owner)
	}
}

// heldBySchedule reports whether [off, end) of obj lies in one part kept
// for the schedule: the read is answered from the part (source.go).
func (s *Engine) heldBySchedule(obj store.Object, off, end int64) bool {
	if !s.scheduled.Load() {
		return false // no loader has given a schedule: no lock taken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sched.parts) == 0 {
		return false
	}
	o := s.parts.find(obj)
	if o == nil {
		return false
	}
	p := s.parts.partAt(o, off)
	return p != nil && len(p.sched) > 0 && p.end >= end
}

// victimLocked is the schedule's part to evict: the part made last for
// it that no read or stream is using; nil when none.
func (sc *schedule) victimLocked() *part {
	var best *part
	for p := range sc.parts {
		if p.pins == 0 && p.why.scheduled() && len(p.holders) == 0 && (best == nil || p.schedMade > best.schedMade) {
			best = p
		}
	}
	return best
}
