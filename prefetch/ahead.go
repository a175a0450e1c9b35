package prefetch

// Read-ahead has three producers besides the sample schedule, a type each:
//
//	window      window.go      a stream's parts: those its reads wait on and
//	                           its read-ahead, within its fair share
//	nextShards  nextshards.go  the starts of the objects a stream's reader
//	                           opens next (by its opener's stride, or the
//	                           listing order) and of hinted objects
//	denseRest   denserest.go   the rest of an object that random reads use
//	                           densely (dense.go decides which)
//
// Each owns its own state (queues, history, the parts it made), reserves
// budget by its class (budget.go) and asks the part table for parts
// through its maker. None calls another: what spans them is the Engine's,
// here (applyLocked, after a read), in part.go (freeLocked: room freed
// lets each pump again; holdLocked: a stream adopts a next shard's part)
// and in budget.go (eviction asks each owner for its victim, in order).

// maker is what a read-ahead producer makes parts with: the part table,
// the budget, and the engine's hooks for what spans owners. Guarded by
// Engine.mu, which the hooks are called with.
type maker struct {
	cfg    Config
	parts  *partTable
	budget *budget
	makerHooks
}

// makerHooks are what a producer asks of the engine to make a part.
type makerHooks struct {
	closed func() bool
	// source is the run of blocks of o from start, up to limit, that no
	// part covers, cut where the cache starts or stops holding them, and
	// whether it is read from the ring (Engine.partSource, source.go).
	source func(o *object, start, limit int64, readAhead bool) (r Range, fromRing bool)
	// newPart makes a part over r, charges it to the class of why and
	// queues its GET (Engine.newPartLocked).
	newPart func(o *object, r, read Range, fromRing bool, why purpose) *part
}

// applyLocked carries out a plan for st after a read: it lets go of held
// parts outside plan.Keep, holds or starts the parts of plan.Need for read
// (empty when the read was served elsewhere) and of plan.Ahead (within st's
// fair share), and spills the window into the next objects. asked is the
// read's length, whether served here or elsewhere. A random read of an
// object the density rule calls dense widens its need (denseRest.need).
func (s *Engine) applyLocked(st *Stream, plan Plan, asked int64, read Range) {
	s.gets.readArrivedLocked(st.o)
	need := plan.Need
	if !plan.Sequential && s.dense.noteLocked(st.o, plan.Need, asked, s.sched.namesLocked(st.o)) {
		need = s.dense.need(st.o, need)
	}
	s.window.keepLocked(st, plan.Keep)
	if !read.Empty() {
		s.window.coverLocked(st, need, read, plan.Sequential, s.budget.fits)
	}
	if s.sched.namesLocked(st.o) {
		// The loader's schedule says what it reads next: bytes past this
		// read belong to other samples, fetched when the schedule says.
		s.checkLocked()
		return
	}
	if !plan.Ahead.Empty() {
		s.window.aheadLocked(st, plan.Ahead)
	}
	if plan.Spill > 0 {
		// The spill is st's read-ahead carried on: it draws on st's share
		// as well as on the class of next shards.
		s.next.spillLocked(st, plan.Spill, len(s.window.streams), func(size int64) bool {
			return s.window.fits(st, size) && s.next.fits(size)
		})
	}
	s.checkLocked()
}
