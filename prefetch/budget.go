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

// shareFits reports whether a stream holding held bytes may hold size more
// of read-ahead (the window class): within its share, while no read
// waits for room.
func (b *budget) shareFits(held, size int64) bool {
	return b.waiting == 0 && b.fits(size) && held+size <= b.share(held)
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
// read by requester, and reports whether it found one. It asks the owner
// of each kind of part for its victim, in this order:
//
//  1. the window: the furthest part of the stream holding the most, if
//     that is more than requester's fair share (budget.share): what a
//     stream holds beyond its share is taken before any other producer,
//     which keeps within its own cap, loses a part;
//  2. the next shards and hints (nextShards): the newest start prefetched
//     for an object nobody has open, a guess;
//  3. the schedule: the part made last for it, whose ranges are read last;
//  4. the window again: the furthest part of the stream holding the most,
//     whatever it holds.
//
// A dense object's rest is never a victim (denseRest), nor is a part a
// read waits on or copies from.
func (s *Engine) evictOneLocked(requester *Stream) bool {
	p := s.window.victimLocked(s.budget.share(requester.heldBytes))
	if p == nil {
		p = s.next.victimLocked()
	}
	if p == nil {
		p = s.sched.victimLocked()
	}
	if p == nil {
		p = s.window.victimLocked(0)
	}
	if p == nil {
		return false
	}
	s.stats.Evicted++
	s.stats.EvictedUnread += p.unread()
	s.removeLocked(p)
	return true
}
