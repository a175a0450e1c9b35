package prefetch

// checkLocked asserts the engine's bookkeeping in builds with the
// invariants tag: the budget charged equals what live parts cost and stays
// within Config.Memory with the pool, every stream's held bytes add up, and
// the part table maps each block to the part covering it.
func (s *Engine) checkLocked() {
	if !invariants {
		return
	}
	var live, dying, allocated int64
	var byClass [numClasses]int64
	running := 0
	for p := range s.parts.live {
		switch p.state {
		case partFetching, partDying:
			running++
		case partFreed:
			panic("prefetch: a freed part is still charged: " + p.String())
		case partParked:
			if !p.headPending {
				panic("prefetch: a parked part has no head pending: " + p.String())
			}
		}
		if (p.state == partDying && !p.dying) || (p.live() && p.dying) {
			panic("prefetch: dying charge differs from the part's state: " + p.String())
		}
		live += p.size
		if p.buf != nil {
			allocated += p.size
		}
		byClass[p.why.class()] += p.size
		if p.dying {
			dying += p.size
		}
		if _, kept := s.sched.parts[p]; kept != (len(p.sched) > 0) || (kept && !p.live()) {
			panic("prefetch: a part keeps scheduled ranges but is not listed, or the reverse: " + p.String())
		}
		if p.live() {
			for b := p.off / s.cfg.BlockSize; b*s.cfg.BlockSize < p.end; b++ {
				if p.o.parts[b] != p {
					panic("prefetch: part missing from its object's blocks: " + p.String())
				}
			}
		}
	}
	switch {
	case running != s.gets.running:
		panic("prefetch: running GETs differ from the parts fetching")
	case live != s.budget.inUse:
		panic("prefetch: budget charged differs from live parts")
	case byClass != s.budget.byClass:
		panic("prefetch: a budget class's charge differs from its parts")
	case s.budget.byClass[classSchedule] > s.cfg.Memory/2:
		panic("prefetch: the schedule's parts exceed half the budget")
	case s.sched.ranges > MaxScheduledRanges+int(s.cfg.PartSize/s.cfg.BlockSize) || s.sched.queued+s.sched.unkept > s.sched.ranges:
		panic("prefetch: more ranges queued or kept than the schedule's cap")
	case dying != s.budget.dying:
		panic("prefetch: dying budget differs from its parts")
	case allocated != s.budget.allocated:
		panic("prefetch: allocated bytes differ from the buffers of live parts")
	case s.budget.allocated > s.budget.inUse || s.budget.inUse > s.cfg.Memory || s.budget.allocated+s.budget.pool.bytes > s.cfg.Memory:
		panic("prefetch: parts and pool exceed the memory budget")
	}
	holding := 0
	for st := range s.window.streams {
		var held int64
		for p := range st.held {
			held += p.size
			if _, ok := p.holders[st]; !ok || !p.live() {
				panic("prefetch: stream holds a part that does not list it")
			}
		}
		if held != st.heldBytes {
			panic("prefetch: stream held bytes do not add up")
		}
		if held > 0 {
			holding++
		}
	}
	if holding != s.budget.holding {
		panic("prefetch: count of holding streams is off")
	}
}
