package prefetch

import "github.com/shardfs/shardfs/store"

// producerRig is a part table and a budget, and a maker over them whose
// parts are entered and charged but get no GET: what a producer chooses,
// seen alone, with no engine around it.
type producerRig struct {
	cfg    Config
	parts  partTable
	budget budget
	made   []*part // every part newPart made, in order
}

func newProducerRig(cfg Config) *producerRig {
	return &producerRig{cfg: cfg, parts: newPartTable(cfg), budget: newBudget(cfg.Memory)}
}

// maker makes parts over the gaps of the part table (no cache, no failed
// range), as Engine.newPartLocked does but for the GET.
func (r *producerRig) maker() maker {
	return maker{cfg: r.cfg, parts: &r.parts, budget: &r.budget, makerHooks: makerHooks{
		closed: func() bool { return false },
		source: func(o *object, start, limit int64, _ bool) (Range, bool) {
			return r.parts.gap(o, start, limit), false
		},
		newPart: func(o *object, rg, read Range, fromRing bool, why purpose) *part {
			p := r.parts.add(o, rg, read, fromRing, why)
			r.budget.charge(why.class(), p.size)
			r.made = append(r.made, p)
			return p
		},
	}}
}

// window is a window over the rig whose streams hold and drop parts
// through the part table, as the engine's do.
func (r *producerRig) window() *window {
	return &window{maker: r.maker(), streams: map[*Stream]struct{}{}, windowHooks: windowHooks{
		purpose: func(forRead, _, _ bool) purpose {
			if forRead {
				return forStreamRead
			}
			return forWindow
		},
		hold: func(st *Stream, p *part) { r.parts.hold(st, p, r.budget.addHeld) },
		drop: func(st *Stream, p *part) { r.parts.drop(st, p, r.budget.addHeld) },
	}}
}

// open is a stream over obj, counted among w's open streams.
func (r *producerRig) open(w *window, obj store.Object) *Stream {
	st := &Stream{obj: obj, o: r.parts.object(obj), held: map[*part]struct{}{}}
	st.o.streams++
	w.openLocked(st)
	return st
}
