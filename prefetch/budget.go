package prefetch

// budget is the memory budget: what live parts are charged, by class, the
// buffers they hold, how many streams hold parts, and who waits for room.
// Guarded by Engine.mu; its methods touch nothing else but the held bytes
// of a stream handed to addHeld.
type budget struct {
	limit     int64             // Config.Memory
	inUse     int64             // charged to live parts
	byClass   [numClasses]int64 // of inUse, by the class of the parts' purpose
	dying     int64             // of inUse, parts removed whose GET has yet to return
	waiting   int               // reads waiting for budget: read-ahead and prefetch yield to them
	released  chan struct{}     // closed and replaced whenever budget is released
	holding   int               // streams holding at least one part
	pool      bufPool
	allocated int64 // bytes in parts' buffers (started, or waiting after their head); with pool.bytes, at most limit
}

func newBudget(limit int64) budget { return budget{limit: limit, released: make(chan struct{})} }

// charge adds size bytes (negative: releases) to class c.
func (b *budget) charge(c budgetClass, size int64) {
	b.inUse += size
	b.byClass[c] += size
}

// fits reports whether size more bytes fit in the budget now.
func (b *budget) fits(size int64) bool { return b.inUse+size <= b.limit }

// classFits reports whether size more bytes fit for class c, whose parts
// may hold at most limit, when no read waits for room: every class but
// reads yields to a read that waits.
func (b *budget) classFits(c budgetClass, size, limit int64) bool {
	return b.waiting == 0 && b.fits(size) && b.byClass[c]+size <= limit
}

// share is the read-ahead a stream holding held bytes may hold: an equal
// slice of the budget among the streams holding parts, counting it.
func (b *budget) share(held int64) int64 {
	n := b.holding
	if held == 0 {
		n++
	}
	return b.limit / int64(max(n, 1))
}

// notify wakes every read waiting for budget.
func (b *budget) notify() {
	close(b.released)
	b.released = make(chan struct{})
}

// allocate returns a buffer of size bytes for a part starting its GET,
// from the pool when it holds one, and trims the pool so that buffers in
// use and pooled never pass the limit.
func (b *budget) allocate(size int64) []byte {
	buf := b.pool.get(size)
	b.allocated += size
	b.pool.trim(b.limit - b.allocated)
	return buf
}

// free takes back a freed part's buffer of size bytes, pooling it unless
// the cache kept it as its RAM copy (kept).
func (b *budget) free(buf []byte, size int64, kept bool) {
	b.allocated -= size
	if !kept {
		b.pool.put(buf)
	}
	b.pool.trim(b.limit - b.allocated)
}

// addHeld adds delta to the bytes a stream holds, heldBytes, and counts
// the streams holding any (share).
func (b *budget) addHeld(heldBytes *int64, delta int64) {
	before := *heldBytes
	*heldBytes += delta
	switch {
	case before == 0 && *heldBytes > 0:
		b.holding++
	case before > 0 && *heldBytes == 0:
		b.holding--
	}
}

// evictOneLocked drops one part that no read is using, to make room for a
// read by requester, and reports whether it found one. In order: the
// furthest part of the stream holding the most, if that is over its share;
// then the newest prefetch for an object not open; then the part made
// last for a loader's schedule that no stream holds; then the furthest part
// of the stream holding the most, whatever it holds.
func (s *Engine) evictOneLocked(requester *Stream) bool {
	richest, furthest := s.registry.richest()
	if furthest != nil && richest.heldBytes > s.budget.share(requester.heldBytes) {
		s.evictLocked(furthest)
		return true
	}
	for i := len(s.parts.spec) - 1; i >= 0; i-- {
		if p := s.parts.spec[i]; p.pins == 0 {
			s.evictLocked(p)
			return true
		}
	}
	if p := s.sched.newestLocked(); p != nil {
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

// richest is the stream holding the most bytes among those holding a
// part no read is using, and the furthest such part; nils when none.
func (r *registry) richest() (*Stream, *part) {
	var best *Stream
	var bestPart *part
	for st := range r.streams {
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
