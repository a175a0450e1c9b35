package prefetch

import "testing"

// TestPartTransitions: every event in every state, against the diagram in
// partstate.go. A pair not listed cannot happen.
func TestPartTransitions(t *testing.T) {
	allowed := map[partState]map[partEvent]partState{
		partQueued:   {evStart: partFetching, evRemove: partRemoved},
		partFetching: {evPark: partParked, evFinish: partDone, evRemove: partDying},
		partParked:   {evResume: partQueued, evRemove: partRemoved},
		partDone:     {evRemove: partRemoved},
		partDying:    {evFinish: partRemoved},
		partRemoved:  {evFree: partFreed},
		partFreed:    {},
	}
	for from := partQueued; from <= partFreed; from++ {
		for ev := evStart; ev <= evFree; ev++ {
			want, legal := allowed[from][ev]
			got, ok := partTransition(from, ev)
			switch {
			case ok != legal:
				t.Errorf("%s on %s: allowed %v, want %v", ev, from, ok, legal)
			case legal && got != want:
				t.Errorf("%s on %s: -> %s, want %s", ev, from, got, want)
			case !legal && got != from:
				t.Errorf("%s on %s refused but moved to %s", ev, from, got)
			}
		}
	}
}

// TestPartLifecycles: the paths a part takes, the head GET's included,
// each state reached by the event the engine sends.
func TestPartLifecycles(t *testing.T) {
	paths := map[string][]partEvent{
		"fetched and dropped":            {evStart, evFinish, evRemove, evFree},
		"head, parked, rest":             {evStart, evPark, evResume, evStart, evFinish, evRemove, evFree},
		"head, parked, never read again": {evStart, evPark, evRemove, evFree},
		"evicted before its GET":         {evRemove, evFree},
		"dropped while fetching":         {evStart, evRemove, evFinish, evFree},
	}
	for name, events := range paths {
		p := &part{o: &object{}}
		for i, ev := range events {
			next, ok := partTransition(p.state, ev)
			if !ok {
				t.Fatalf("%s: event %d (%s) refused in %s", name, i, ev, p.state)
			}
			p.to(ev)
			if p.state != next {
				t.Fatalf("%s: to(%s) left %s, want %s", name, ev, p.state, next)
			}
		}
		if p.state != partFreed {
			t.Errorf("%s ends %s, want freed", name, p.state)
		}
	}
}

// TestHeadPartIsParkedThenResumed follows a real head part through the
// engine: fetching its head, parked after it with no GET slot, queued
// again by the object's next read, then done. The states are looked at
// once the engine is settled (settledStats): no GET left running.
func TestHeadPartIsParkedThenResumed(t *testing.T) {
	ctx := testContext(t)
	cfg := headConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("h", 64<<10)
	st := s.Open(obj)
	defer st.Close()
	if err := readCheck(ctx, st, obj, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	state := func() partState {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.parts.partAt(st.o, 0).state
	}
	settled := settledStats(t, s)
	if got := state(); got != partParked {
		t.Fatalf("the head part is %s after its head arrived and no read followed, want %s", got, partParked)
	}
	if settled.Running != 0 {
		t.Fatalf("%d GETs running while the head part is parked, want 0", settled.Running)
	}
	if err := readCheck(ctx, st, obj, make([]byte, 4096), 4096); err != nil {
		t.Fatal(err)
	}
	settledStats(t, s)
	if got := state(); got != partDone {
		t.Fatalf("the head part is %s after the next read and its GET ended, want %s", got, partDone)
	}
}
