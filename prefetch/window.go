package prefetch

// window is each open stream's read-ahead: it makes and holds the parts of
// a stream's plan after a read (those the read waits on, and the window
// ahead of it, up to the stream's fair share of the budget:
// budget.shareFits), lets go of the parts the plan no longer keeps, and
// counts the open streams. A stream's held parts and bytes are the
// Stream's own (stream.go), which also makes the part a read waits on
// when none covers it (Stream.pin). Its victim is the read-ahead needed
// last by the stream holding the most. Guarded by Engine.mu.
type window struct {
	maker
	streams map[*Stream]struct{}
	windowHooks
}

// windowHooks are what the window asks of the engine, each called with
// Engine.mu held.
type windowHooks struct {
	// purpose is why a stream makes a part (Engine.streamPurpose, source.go).
	purpose func(forRead, sequential, fromRing bool) purpose
	// hold makes st a holder of p, adopting a part prefetched for an
	// object nobody had open (Engine.holdLocked); drop ends st's interest
	// in p, which goes when nothing else keeps it (Engine.dropLocked).
	hold, drop func(st *Stream, p *part)
}

// openLocked counts st among the open streams.
func (w *window) openLocked(st *Stream) { w.streams[st] = struct{}{} }

// closeLocked drops every part st holds and forgets it.
func (w *window) closeLocked(st *Stream) {
	for p := range st.held {
		w.drop(st, p)
	}
	delete(w.streams, st)
}

// keepLocked lets go of st's held parts outside keep.
func (w *window) keepLocked(st *Stream, keep Range) {
	for p := range st.held {
		if p.end <= keep.Start || p.off >= keep.End {
			w.drop(st, p)
		}
	}
}

// fits reports whether st may hold size more bytes of read-ahead: its
// fair share of the budget, while no read waits for room.
func (w *window) fits(st *Stream, size int64) bool { return w.budget.shareFits(st.heldBytes, size) }

// aheadLocked makes st hold the read-ahead over r within its fair share.
func (w *window) aheadLocked(st *Stream, r Range) {
	w.coverLocked(st, r, Range{}, true, func(size int64) bool { return w.fits(st, size) })
}

// coverLocked makes st hold every part over r, starting reads for the gaps
// while afford allows. The parts are for read, which waits on them, or are
// read-ahead when read is empty; read-ahead skips blocks the cache has in
// memory: the read will find them there. sequential says whether st is
// streaming, and so will read the new parts whole.
func (w *window) coverLocked(st *Stream, r, read Range, sequential bool, afford func(size int64) bool) {
	urgent := !read.Empty()
	for pos := r.Start; pos < r.End; {
		p := w.parts.partAt(st.o, pos)
		if p == nil {
			gap, fromRing := w.source(st.o, pos, r.End, !urgent)
			if gap.Empty() {
				pos = gap.End + w.cfg.BlockSize
				continue
			}
			if !afford(w.cfg.chargeOf(gap)) {
				return
			}
			p = w.newPart(st.o, gap, read, fromRing, w.purpose(urgent, sequential, fromRing))
		}
		w.hold(st, p)
		pos = p.end
	}
}

// victimLocked is the part to evict of the stream holding the most among
// those holding a part no read is using, when it holds more than over
// bytes: its furthest such part, the read-ahead needed last. nil when
// none.
func (w *window) victimLocked(over int64) *part {
	var richest *Stream
	var furthest *part
	for st := range w.streams {
		if richest != nil && st.heldBytes <= richest.heldBytes {
			continue
		}
		if p := st.furthestUnpinned(); p != nil {
			richest, furthest = st, p
		}
	}
	if furthest == nil || richest.heldBytes <= over {
		return nil
	}
	return furthest
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
