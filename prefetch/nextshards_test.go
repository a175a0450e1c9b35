package prefetch

import "testing"

// TestNextShardsVictimIsTheNewestFreeGuess: of the starts prefetched for
// objects nobody has open, the victim is the one made last that no read
// is using; one a stream adopted is no longer the producer's, and its
// charge moves to the window's class.
func TestNextShardsVictimIsTheNewestFreeGuess(t *testing.T) {
	cfg := smallConfig()
	rig := newProducerRig(cfg)
	n := &nextShards{maker: rig.maker()}
	always := func(int64) bool { return true }
	for _, key := range []string{"a", "b", "c"} {
		n.prefetchStartLocked(fakeObject(key, cfg.PartSize), cfg.PartSize, forNextShard, always)
	}
	a, b, c := rig.made[0], rig.made[1], rig.made[2]
	if got := n.victimLocked(); got != c {
		t.Fatalf("victim %v, want %v, the newest", got, c)
	}
	c.pins++ // a read copies from it
	if got := n.victimLocked(); got != b {
		t.Fatalf("victim %v, want %v: the newest is in use", got, b)
	}

	next, window := rig.budget.byClass[classNext], rig.budget.byClass[classWindow]
	n.unspecLocked(b) // a stream opened b and holds its part
	if got := n.victimLocked(); got != a {
		t.Fatalf("victim %v, want %v: b's part is its stream's now", got, a)
	}
	if b.why != forWindow || rig.budget.byClass[classNext] != next-b.size || rig.budget.byClass[classWindow] != window+b.size {
		t.Fatalf("adopted part: purpose %v, next class %d, window class %d; want window, its charge moved", b.why,
			rig.budget.byClass[classNext], rig.budget.byClass[classWindow])
	}
	if n.stats.NextParts != 3 {
		t.Fatalf("NextParts = %d, want 3", n.stats.NextParts)
	}
}
