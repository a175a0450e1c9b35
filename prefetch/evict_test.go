package prefetch

import (
	"fmt"
	"slices"
	"testing"
)

// TestEvictionAsksEachOwnerInOrder: a read that needs room takes it from
// what a stream holds beyond its fair share, then from the starts
// prefetched for objects nobody has open (newest first), then from the
// loader's schedule (made last first), then from any stream's read-ahead
// (furthest first); then nothing is left to take.
func TestEvictionAsksEachOwnerInOrder(t *testing.T) {
	cfg := smallConfig()
	ps := cfg.PartSize
	f := &fakeFetcher{hold: make(chan struct{})} // every part stays in flight until it is removed
	s := newTestEngine(t, cfg, f, nil)
	sched := fakeObject("sched", 4*ps)
	s.Schedule(1, []Scheduled{{Obj: sched, Off: 0, Len: 100}, {Obj: sched, Off: 2 * ps, Len: 100}})
	s.Hint(fakeObject("hint1", ps), fakeObject("hint2", ps))
	rich := s.Open(fakeObject("rich", 16*ps))
	requester := s.Open(fakeObject("requester", ps))

	s.mu.Lock()
	defer s.mu.Unlock()
	// Ten parts: more than half the budget, its share beside the
	// requester's.
	s.window.coverLocked(rich, Range{0, 10 * ps}, Range{}, true, func(int64) bool { return true })
	var parts []*part
	for p := range s.parts.live {
		parts = append(parts, p)
	}
	name := func(p *part) string { return fmt.Sprintf("%s@%d", p.o.obj.Key, p.off/ps) }
	// The first victim has its bytes in, and a read took some of them:
	// the rest are counted as evicted unread.
	first := parts[slices.IndexFunc(parts, func(p *part) bool { return name(p) == "rich@9" })]
	first.arrived.set(ps)
	first.served = 1000
	var got []string
	for s.evictOneLocked(requester) {
		i := slices.IndexFunc(parts, func(p *part) bool { return !p.live() })
		if i < 0 {
			t.Fatal("eviction reported a part but every part is still live")
		}
		got = append(got, name(parts[i]))
		parts = slices.Delete(parts, i, i+1)
	}
	want := []string{"rich@9", "rich@8", "hint2@0", "hint1@0", "sched@2", "sched@0",
		"rich@7", "rich@6", "rich@5", "rich@4", "rich@3", "rich@2", "rich@1", "rich@0"}
	if !slices.Equal(got, want) {
		t.Fatalf("evicted in the order\n%v\nwant\n%v", got, want)
	}
	if len(parts) != 0 {
		t.Fatalf("nothing more to evict, but %d parts are still live", len(parts))
	}
	if s.stats.EvictedUnread != ps-1000 {
		t.Errorf("evicted unread %d bytes, want %d: the first victim's arrived bytes no read took", s.stats.EvictedUnread, ps-1000)
	}
}
