package prefetch

import "testing"

// TestWindowVictimIsTheFurthestFreePartOfTheRichestStream: the window's
// victim is the part furthest into its object, among those no read is
// using, of the stream holding the most, and only when that stream holds
// more than it is asked about.
func TestWindowVictimIsTheFurthestFreePartOfTheRichestStream(t *testing.T) {
	cfg := smallConfig()
	rig := newProducerRig(cfg)
	w := rig.window()
	ps := cfg.PartSize
	rich, poor := rig.open(w, fakeObject("rich", 8*ps)), rig.open(w, fakeObject("poor", 8*ps))
	w.coverLocked(rich, Range{0, 3 * ps}, Range{}, true, func(int64) bool { return true })
	w.coverLocked(poor, Range{0, ps}, Range{}, true, func(int64) bool { return true })
	at := func(st *Stream, off int64) *part { return rig.parts.partAt(st.o, off) }
	at(rich, 2*ps).pins++ // a read copies from it

	if got, want := w.victimLocked(0), at(rich, ps); got != want {
		t.Fatalf("victim %v, want %v: the furthest part of the richest stream that no read is using", got, want)
	}
	if got := w.victimLocked(rich.heldBytes); got != nil {
		t.Fatalf("victim %v of a stream holding no more than it was asked about", got)
	}
	if got, want := w.victimLocked(rich.heldBytes-1), at(rich, ps); got != want {
		t.Fatalf("victim %v, want %v: the richest stream holds more than it was asked about", got, want)
	}
	at(rich, 0).pins++
	at(rich, ps).pins++
	if got, want := w.victimLocked(0), at(poor, 0); got != want {
		t.Fatalf("victim %v, want %v: every part of the richest stream is in use", got, want)
	}
}

// TestWindowReadAheadStopsAtItsShare: a stream's read-ahead takes at most
// its fair share of the budget, an equal slice among the streams holding
// parts, though the budget has room for more.
func TestWindowReadAheadStopsAtItsShare(t *testing.T) {
	cfg := smallConfig()
	cfg.Memory = 8 * cfg.PartSize
	rig := newProducerRig(cfg)
	w := rig.window()
	ps := cfg.PartSize
	other, st := rig.open(w, fakeObject("other", 8*ps)), rig.open(w, fakeObject("st", 8*ps))
	w.coverLocked(other, Range{0, ps}, Range{}, true, func(int64) bool { return true })

	w.aheadLocked(st, Range{0, 8 * ps})
	if share := cfg.Memory / 2; st.heldBytes != share {
		t.Fatalf("read-ahead holds %d bytes with two streams holding parts, want its share %d", st.heldBytes, share)
	}
}
