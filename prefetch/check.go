package prefetch

// checkLocked asserts the scheduler's bookkeeping in builds with the
// invariants tag: the budget charged equals what live parts cost and stays
// within Config.Memory with the pool, every stream's held bytes add up, and
// the registry maps each block to the part covering it.
func (s *Scheduler) checkLocked() {
	if !invariants {
		return
	}
	var live, spec, dying, allocated int64
	for p := range s.live {
		live += p.size
		if p.buf != nil {
			allocated += p.size
		}
		if p.spec != specNone {
			spec += p.size
		}
		if p.dying {
			dying += p.size
		}
		if !p.removed {
			for b := p.off / s.cfg.BlockSize; b*s.cfg.BlockSize < p.end; b++ {
				if p.o.parts[b] != p {
					panic("prefetch: part missing from its object's registry: " + p.String())
				}
			}
		}
	}
	switch {
	case live != s.inUse:
		panic("prefetch: budget charged differs from live parts")
	case spec != s.specInUse:
		panic("prefetch: prefetch budget differs from its parts")
	case dying != s.dying:
		panic("prefetch: dying budget differs from its parts")
	case allocated != s.allocated:
		panic("prefetch: allocated bytes differ from the buffers of live parts")
	case s.allocated > s.inUse || s.inUse > s.cfg.Memory || s.allocated+s.pool.bytes > s.cfg.Memory:
		panic("prefetch: parts and pool exceed the memory budget")
	}
	holding := 0
	for st := range s.streams {
		var held int64
		for p := range st.held {
			held += p.size
			if _, ok := p.holders[st]; !ok || p.removed {
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
	if holding != s.holding {
		panic("prefetch: count of holding streams is off")
	}
}
