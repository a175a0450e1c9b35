package prefetch

import "github.com/shardfs/shardfs/store"

// applyLocked carries out a plan for st: it lets go of held parts outside
// plan.Keep, holds or starts the parts of plan.Need (when the read is to be
// served here) and of plan.Ahead (within st's fair share), and spills the
// window into the next objects.
func (s *Scheduler) applyLocked(st *Stream, plan Plan, serveHere bool) {
	for p := range st.held {
		if p.end <= plan.Keep.Start || p.off >= plan.Keep.End {
			s.dropLocked(st, p)
		}
	}
	if serveHere {
		s.coverLocked(st, plan.Need, true, s.affordLocked)
	}
	if !plan.Ahead.Empty() {
		s.coverLocked(st, plan.Ahead, false, func(size int64) bool {
			return s.waiting == 0 && s.affordLocked(size) && st.heldBytes+size <= s.shareLocked(st)
		})
	}
	if plan.Spill > 0 {
		s.spillLocked(st, plan.Spill)
	}
	s.checkLocked()
}

// coverLocked makes st hold every part over r, starting GETs for the gaps
// while afford allows.
func (s *Scheduler) coverLocked(st *Stream, r Range, urgent bool, afford func(size int64) bool) {
	for pos := r.Start; pos < r.End; {
		p := s.partAt(st.o, pos)
		if p == nil {
			gap := s.gapLocked(st.o, pos, r.End)
			if !afford(s.chargeOf(gap)) {
				return
			}
			p = s.newPartLocked(st.o, gap, urgent, !urgent)
		}
		s.holdLocked(st, p)
		pos = p.end
	}
}

// spillLocked prefetches the start of the objects after st's in listing
// order: the part of st's window that reaches past its end, and at least
// the first part of each of the next NextShards objects.
func (s *Scheduler) spillLocked(st *Stream, spill int64) {
	i, ok := s.orderIndex[st.obj.Key]
	if !ok || s.cfg.NextShards <= 0 {
		return
	}
	for _, next := range s.order[i+1 : min(i+1+s.cfg.NextShards, len(s.order))] {
		s.prefetchStartLocked(next, min(max(spill, s.cfg.PartSize), next.Size), specNext)
		spill = max(spill-next.Size, 0)
	}
}

// pumpHintsLocked prefetches the first part of hinted objects, in order,
// while the budget allows.
func (s *Scheduler) pumpHintsLocked() {
	for len(s.hints) > 0 && !s.closed {
		obj := s.hints[0]
		if !s.prefetchStartLocked(obj, min(s.cfg.PartSize, obj.Size), specHint) {
			return
		}
		s.hints[0] = store.Object{}
		s.hints = s.hints[1:]
	}
}

// prefetchStartLocked has the first want bytes of obj fetched or in flight
// for a stream yet to open it, as far as the budget allows, and reports
// whether all of it is. Objects already open are left to their streams.
func (s *Scheduler) prefetchStartLocked(obj store.Object, want int64, kind specKind) bool {
	o := s.objectLocked(obj)
	defer s.tidyLocked(o)
	if o.streams > 0 {
		return true
	}
	want = min(ceilTo(want, s.cfg.BlockSize), obj.Size)
	for pos := int64(0); pos < want; {
		if p := s.partAt(o, pos); p != nil {
			pos = p.end
			continue
		}
		gap := s.gapLocked(o, pos, want)
		if !s.affordSpecLocked(s.chargeOf(gap)) {
			return false
		}
		p := s.newPartLocked(o, gap, false, true)
		p.spec = kind
		s.specInUse += p.size
		s.spec = append(s.spec, p)
		if kind == specNext {
			s.stats.NextParts++
		} else {
			s.stats.HintParts++
		}
		pos = gap.End
	}
	return true
}
