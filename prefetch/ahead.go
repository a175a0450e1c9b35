package prefetch

import "github.com/shardfs/shardfs/store"

// registry is what the read-ahead producers know beyond the part table:
// the open streams, the listing order and when each key was last opened,
// each opener's order, the hinted objects still to prefetch, and the
// objects random reads use densely. Guarded by Engine.mu.
type registry struct {
	streams  map[*Stream]struct{}
	order    []store.Object             // the listing, sorted by key (indexOf)
	openedAt []uint64                   // by index in order: opens when it was last opened, 0 never
	opens    uint64                     // streams opened so far
	hints    []store.Object             // hinted objects not yet prefetched, in order
	access   map[objectID]*randomAccess // blocks random reads touched, per object (dense.go)
	dense    []denseFetch               // objects whose rest is fetched in the background, in the order they turned dense
	openers  openers                    // the order each opener takes objects in (openers.go)
}

// denseFetch is the background fetch of the rest of an object that random
// reads use densely: parts are made from next on as the budget allows.
type denseFetch struct {
	obj  store.Object
	next int64
}

// applyLocked carries out a plan for st after a read: it lets go of held
// parts outside plan.Keep, holds or starts the parts of plan.Need for read
// (empty when the read was served elsewhere) and of plan.Ahead (within st's
// fair share), and spills the window into the next objects. asked is the
// read's length, whether served here or elsewhere.
func (s *Engine) applyLocked(st *Stream, plan Plan, asked int64, read Range) {
	s.gets.readArrivedLocked(st.o)
	need := plan.Need
	if !plan.Sequential && s.noteRandomLocked(st.o, plan.Need, asked) {
		need = s.denseNeed(st.o, need)
	}
	for p := range st.held {
		if p.end <= plan.Keep.Start || p.off >= plan.Keep.End {
			s.dropLocked(st, p)
		}
	}
	if !read.Empty() {
		s.coverLocked(st, need, read, plan.Sequential, s.budget.fits)
	}
	if s.sched.namesLocked(st.o) {
		// The loader's schedule says what it reads next: bytes past this
		// read belong to other samples, fetched when the schedule says.
		s.checkLocked()
		return
	}
	withinShare := func(size int64) bool {
		return s.budget.waiting == 0 && s.budget.fits(size) && st.heldBytes+size <= s.budget.share(st.heldBytes)
	}
	if !plan.Ahead.Empty() {
		s.coverLocked(st, plan.Ahead, Range{}, true, withinShare)
	}
	if plan.Spill > 0 {
		s.spillLocked(st, plan.Spill, func(size int64) bool {
			return withinShare(size) && s.budget.byClass[classNext]+size <= s.cfg.Memory/2
		})
	}
	s.checkLocked()
}

// coverLocked makes st hold every part over r, starting reads for the gaps
// while afford allows. The parts are for read, which waits on them, or are
// read-ahead when read is empty; read-ahead skips blocks the cache has in
// memory: the read will find them there. sequential says whether st is
// streaming, and so will read the new parts whole.
func (s *Engine) coverLocked(st *Stream, r, read Range, sequential bool, afford func(size int64) bool) {
	urgent := !read.Empty()
	for pos := r.Start; pos < r.End; {
		p := s.parts.partAt(st.o, pos)
		if p == nil {
			gap, fromRing := s.partSource(st.o, pos, r.End, !urgent)
			if gap.Empty() {
				pos = gap.End + s.cfg.BlockSize
				continue
			}
			if !afford(s.cfg.chargeOf(gap)) {
				return
			}
			p = s.newPartLocked(st.o, gap, read, fromRing, s.streamPurpose(urgent, sequential, fromRing))
		}
		s.holdLocked(st, p)
		pos = p.end
	}
}

// spillLocked prefetches the start of the objects after st's in listing
// order: the part of st's window that reaches past its end, and at least
// the first part of each of the next NextShards objects. It is st's
// read-ahead carried on, so it draws on st's share as its window shrinks.
//
// Objects another reader opened after st's was opened, or just before it
// while st's fellow readers were opening theirs (st.since; open now or
// already read), objects open since before, and objects whose start
// another stream's spill has claimed are passed over without counting:
// when several readers split a listing (DataLoader workers each take every
// W-th shard), the next object is another reader's, and the one st's
// reader opens next lies past those. Four readers taking shards from one
// queue open them in any order; counting only opens after st's, a shard
// read and closed by the reader that opened it first was fetched a second
// time, whole, by the spill of the one opened after it. Objects opened
// before that only (in an earlier epoch) are prefetched again.
func (s *Engine) spillLocked(st *Stream, spill int64, afford func(size int64) bool) {
	i, ok := s.registry.indexOf(st.obj.Key)
	if !ok || s.cfg.NextShards <= 0 {
		return
	}
	if j, ok := s.registry.openers.next(st.opener, i); ok {
		if j >= 0 {
			s.spillByStrideLocked(st, i, j-i, spill, afford)
		}
		return
	}
	// What can be passed over: objects opened since st, plus those that
	// other streams hold open or claimed.
	passes := int(s.registry.opens-st.since) + len(s.registry.streams)*(s.cfg.NextShards+1)
	for j, taken := i+1, 0; j < len(s.registry.order) && taken < s.cfg.NextShards; j++ {
		next := s.registry.order[j]
		o := s.parts.find(next)
		if s.registry.openedAt[j] > st.since || (o != nil && (o.streams > 0 || (o.claimedBy != nil && o.claimedBy != st))) {
			if passes--; passes < 0 {
				return
			}
			continue
		}
		s.parts.object(next).claimedBy = st
		// Whole parts, as for the window itself.
		s.prefetchStartLocked(next, min(ceilTo(max(spill, 1), s.cfg.PartSize), next.Size), forNextShard, afford)
		spill = max(spill-next.Size, 0)
		taken++
	}
}

// spillByStrideLocked is spillLocked for a stream whose opener's history
// gives the stride between its opens (openers.go): the objects at i plus
// one, two, … NextShards strides. Objects open already are left to their
// streams, and objects another stream's spill claimed to it.
func (s *Engine) spillByStrideLocked(st *Stream, i, stride int, spill int64, afford func(size int64) bool) {
	for k := 1; k <= s.cfg.NextShards; k++ {
		j := i + k*stride
		if j < 0 || j >= len(s.registry.order) {
			return
		}
		next := s.registry.order[j]
		if k == 1 {
			s.registry.openers.guessed(st.opener, j)
		}
		o := s.parts.find(next)
		if o == nil || o.streams == 0 && (o.claimedBy == nil || o.claimedBy == st) {
			s.parts.object(next).claimedBy = st
			s.prefetchStartLocked(next, min(ceilTo(max(spill, 1), s.cfg.PartSize), next.Size), forNextShard, afford)
		}
		spill = max(spill-next.Size, 0)
	}
}

// pumpHintsLocked prefetches the first part of hinted objects, in order,
// while the budget allows.
func (s *Engine) pumpHintsLocked() {
	for len(s.registry.hints) > 0 && !s.closed {
		obj := s.registry.hints[0]
		// Hinted objects together may use at most half the budget, so
		// that open streams keep the rest.
		afford := func(size int64) bool { return s.budget.classFits(classNext, size, s.cfg.Memory/2) }
		if !s.prefetchStartLocked(obj, min(s.cfg.PartSize, obj.Size), forHint, afford) {
			return
		}
		s.registry.hints[0] = store.Object{}
		s.registry.hints = s.registry.hints[1:]
	}
}

// prefetchStartLocked has the first want bytes of obj fetched or in flight
// for a stream yet to open it, as far as afford allows, and reports whether
// all of it is. Objects already open are left to their streams.
func (s *Engine) prefetchStartLocked(obj store.Object, want int64, why purpose, afford func(size int64) bool) bool {
	o := s.parts.object(obj)
	defer s.parts.tidy(o)
	if o.streams > 0 {
		return true
	}
	want = min(ceilTo(want, s.cfg.BlockSize), obj.Size)
	for pos := int64(0); pos < want; {
		if p := s.parts.partAt(o, pos); p != nil {
			pos = p.end
			continue
		}
		// A run in the RAM tier is served from there; a run in the ring is
		// read ahead from disk like one fetched, so that an open finds its
		// first bytes in memory rather than waiting on the disk.
		gap, cached := s.partSource(o, pos, want, true)
		if gap.Empty() {
			pos += s.cfg.BlockSize
			continue
		}
		if !afford(s.cfg.chargeOf(gap)) {
			return false
		}
		s.newPartLocked(o, gap, Range{}, cached, why)
		if why == forNextShard {
			s.stats.NextParts++
		} else {
			s.stats.HintParts++
		}
		pos = gap.End
	}
	return true
}

// denseInFlight bounds the background parts of dense objects out at once,
// in parts of PartSize (128 MiB at the defaults): enough GETs to fill a
// link on which each connection is slow (a remote region's rate per
// connection), few enough that a read seldom lands on a block behind a
// part's front.
const denseInFlight = 16

// pumpDenseLocked makes the parts of objects read densely (source.go,
// noteRandomLocked), in order, a PartSize part per GET, while at most
// denseInFlight parts' worth of bytes are out, they take at most half the
// budget, and no read waits for budget: reads come first, and the rest of
// the budget stays with streams. Blocks the RAM tier holds are left out;
// blocks in the ring are read from there into RAM.
//
// Few long GETs, not many short ones: the store spends most of its CPU
// per request, not per byte, and so does the client, so the same bytes
// in longer GETs cost both sides less. A read of a
// block still on its way waits for the bytes before it in its part; with
// few parts out, most reads that miss land on blocks no part covers yet
// and get a GET of their own that starts at their block (denseNeed).
func (s *Engine) pumpDenseLocked() {
	afford := func(size int64) bool {
		limit := min(s.cfg.Memory/2, denseInFlight*s.cfg.PartSize)
		return s.budget.classFits(classDense, size, limit)
	}
	for len(s.registry.dense) > 0 && !s.closed {
		d := &s.registry.dense[0]
		o := s.parts.object(d.obj)
		for d.next < d.obj.Size {
			if p := s.parts.partAt(o, d.next); p != nil {
				d.next = p.end
				continue
			}
			gap, cached := s.partSource(o, d.next, d.next+s.cfg.PartSize, true)
			if gap.Empty() {
				d.next = gap.End + s.cfg.BlockSize
				continue
			}
			if cached && s.cache.RAMFree() < gap.Len() {
				// The ring holds these blocks and the RAM tier has no
				// room for them: copied there, they would push out
				// blocks read before them. Reads find them in the
				// ring, a grain at a time.
				d.next = gap.End
				continue
			}
			if !afford(s.cfg.chargeOf(gap)) {
				s.parts.tidy(o)
				return
			}
			s.newPartLocked(o, gap, Range{}, cached, forDenseRest)
			s.stats.DenseParts++
			d.next = gap.End
		}
		s.parts.tidy(o)
		s.registry.dense[0] = denseFetch{}
		s.registry.dense = s.registry.dense[1:]
	}
}
