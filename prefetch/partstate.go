package prefetch

import "fmt"

// partState is where a part is in its life. Every change goes through
// partTransition, the one transition function, and part.to, which applies
// it; the booleans it replaces (started, finished, removed, freed) are
// questions asked of the state (live, settled). The transitions:
//
//	queued    start   fetching   a GET slot is free (or it reads the ring)
//	fetching  park    parked     its head GET is over, nobody read since
//	parked    resume  queued     the object was read again: the rest's GET
//	fetching  finish  done       buf and err are final
//	queued    remove  removed    never fetched: reads waiting get ErrClosed
//	parked    remove  removed
//	done      remove  removed    reads may still pin its buffer
//	fetching  remove  dying      the GET is cancelled; budget still charged
//	dying     finish  removed
//	removed   free    freed      unpinned: buffer and budget go back
//
// queued, fetching, parked and done parts cover their blocks in the part
// table (live); dying, removed and freed ones do not. Only fetching and dying
// parts hold a GET slot.
type partState uint8

const (
	partQueued partState = iota
	partFetching
	partParked
	partDone
	partDying
	partRemoved
	partFreed
)

var partStateNames = [...]string{"queued", "fetching", "parked", "done", "dying", "removed", "freed"}

func (s partState) String() string { return partStateNames[s] }

// partEvent is what happens to a part.
type partEvent uint8

const (
	evStart  partEvent = iota // a GET slot is free for it
	evPark                    // its head GET is over and nobody read the object since
	evResume                  // the object was read again: the rest's GET may start
	evFinish                  // its GET returned
	evRemove                  // taken off its blocks (evicted, failed, dropped, closed)
	evFree                    // removed, GET over and unpinned: buffer and budget go back
)

var partEventNames = [...]string{"start", "park", "resume", "finish", "remove", "free"}

func (e partEvent) String() string { return partEventNames[e] }

// partTransition is the state a part in from moves to on ev; ok is false
// when ev cannot happen in from.
func partTransition(from partState, ev partEvent) (to partState, ok bool) {
	switch {
	case from == partQueued && ev == evStart:
		return partFetching, true
	case from == partFetching && ev == evPark:
		return partParked, true
	case from == partParked && ev == evResume:
		return partQueued, true
	case from == partFetching && ev == evFinish:
		return partDone, true
	case from == partDying && ev == evFinish:
		return partRemoved, true
	case from == partFetching && ev == evRemove:
		return partDying, true
	case (from == partQueued || from == partParked || from == partDone) && ev == evRemove:
		return partRemoved, true
	case from == partRemoved && ev == evFree:
		return partFreed, true
	}
	return from, false
}

// to applies ev. An event that cannot happen is a bug in the engine:
// builds with the invariants tag panic on it; others keep the state.
func (p *part) to(ev partEvent) {
	next, ok := partTransition(p.state, ev)
	if !ok {
		if invariants {
			panic(fmt.Sprintf("prefetch: part %s: %s while %s", p, ev, p.state))
		}
		return
	}
	p.state = next
}

// live reports whether p covers its blocks in the part table.
func (p *part) live() bool {
	return p.state == partQueued || p.state == partFetching || p.state == partParked || p.state == partDone
}

// settled reports whether p's buf and err are final.
func (p *part) settled() bool {
	return p.state == partDone || p.state == partRemoved || p.state == partFreed
}
