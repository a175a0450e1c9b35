package prefetch

// budget is the memory budget's state: what live parts are charged and who
// waits for room. Guarded by Engine.mu.
type budget struct {
	inUse     int64             // charged to live parts
	byClass   [numClasses]int64 // of inUse, by the class of the parts' purpose
	dying     int64             // of inUse, parts removed whose GET has yet to return
	waiting   int               // reads waiting for budget: read-ahead and prefetch yield to them
	released  chan struct{}     // closed and replaced whenever budget is released
	holding   int               // streams holding at least one part
	pool      bufPool
	allocated int64 // bytes in parts' buffers (started, or waiting after their head); with pool.bytes, at most Memory
}

// charge adds size bytes (negative: releases) to class c.
func (b *budget) charge(c budgetClass, size int64) {
	b.inUse += size
	b.byClass[c] += size
}

// shareLocked is the read-ahead st may hold: an equal slice of the budget
// among the streams holding parts, counting st.
func (s *Engine) shareLocked(st *Stream) int64 {
	n := s.budget.holding
	if st.heldBytes == 0 {
		n++
	}
	return s.cfg.Memory / int64(max(n, 1))
}

// affordLocked reports whether size more bytes fit in the budget now.
func (s *Engine) affordLocked(size int64) bool { return s.budget.inUse+size <= s.cfg.Memory }

// affordHintLocked is affordLocked for hinted objects, which together may
// use at most half the budget so open streams keep the rest, and never
// take budget that a read is waiting for.
func (s *Engine) affordHintLocked(size int64) bool {
	return s.budget.waiting == 0 && s.affordLocked(size) && s.budget.byClass[classNext]+size <= s.cfg.Memory/2
}

// evictOneLocked drops one part that no read is using, to make room for a
// read by requester, and reports whether it found one. In order: the
// furthest part of the stream holding the most, if that is over its share;
// then the newest prefetch for an object not open; then the part made
// last for a loader's schedule that no stream holds; then the furthest part
// of the stream holding the most, whatever it holds.
func (s *Engine) evictOneLocked(requester *Stream) bool {
	richest, furthest := s.richestLocked()
	if furthest != nil && richest.heldBytes > s.shareLocked(requester) {
		s.evictLocked(furthest)
		return true
	}
	for i := len(s.registry.spec) - 1; i >= 0; i-- {
		if p := s.registry.spec[i]; p.pins == 0 {
			s.evictLocked(p)
			return true
		}
	}
	if p := s.newestScheduledLocked(); p != nil {
		s.evictLocked(p)
		return true
	}
	if furthest != nil {
		s.evictLocked(furthest)
		return true
	}
	return false
}

func (s *Engine) evictLocked(p *part) {
	s.stats.Evicted++
	s.removeLocked(p)
}

// richestLocked is the stream holding the most bytes among those holding a
// part no read is using, and the furthest such part; nils when none.
func (s *Engine) richestLocked() (*Stream, *part) {
	var best *Stream
	var bestPart *part
	for st := range s.registry.streams {
		if best != nil && st.heldBytes <= best.heldBytes {
			continue
		}
		if p := st.furthestUnpinned(); p != nil {
			best, bestPart = st, p
		}
	}
	return best, bestPart
}

// furthestUnpinned is the held part furthest into the object that no read
// is using: the read-ahead needed last.
func (st *Stream) furthestUnpinned() *part {
	var best *part
	for p := range st.held {
		if p.pins == 0 && (best == nil || p.off > best.off) {
			best = p
		}
	}
	return best
}
