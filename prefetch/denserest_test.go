package prefetch

import "testing"

// TestDenseRestKeepsAtMostDenseInFlightPartsOut: a dense object's rest is
// made denseInFlight parts at a time, though half the budget holds more;
// room freed lets the next part go out.
func TestDenseRestKeepsAtMostDenseInFlightPartsOut(t *testing.T) {
	cfg := smallConfig()
	cfg.Memory = 4 * denseInFlight * cfg.PartSize
	rig := newProducerRig(cfg)
	d := &denseRest{maker: rig.maker(), access: map[objectID]*randomAccess{}}
	obj := fakeObject("dense", 3*denseInFlight*cfg.PartSize)
	d.queue = append(d.queue, denseFetch{obj: obj})

	d.pumpLocked()
	if len(rig.made) != denseInFlight {
		t.Fatalf("%d parts out, want denseInFlight (%d) though half the budget holds %d", len(rig.made), denseInFlight, cfg.Memory/2/cfg.PartSize)
	}
	rig.budget.charge(classDense, -rig.made[0].size) // its bytes reached the cache
	d.pumpLocked()
	if len(rig.made) != denseInFlight+1 || rig.made[denseInFlight].off != denseInFlight*cfg.PartSize {
		t.Fatalf("after one part freed: %d parts, the last at %d; want one more, in order", len(rig.made), rig.made[len(rig.made)-1].off)
	}
}

// TestDenseRestLeavesAScheduledObjectSparse: random reads that make an
// object dense do not while the loader's schedule names it: its reads are
// the schedule's.
func TestDenseRestLeavesAScheduledObjectSparse(t *testing.T) {
	cfg := smallConfig()
	cfg.DenseRandom = true
	for _, scheduled := range []bool{true, false} {
		rig := newProducerRig(cfg)
		d := &denseRest{maker: rig.maker(), cache: &blockCache{}, access: map[objectID]*randomAccess{}}
		// Small next to the budget: dense once reads have taken half of it.
		o := rig.parts.object(fakeObject("small", 4*cfg.BlockSize))
		dense := false
		for b := range int64(2) {
			dense = d.noteLocked(o, Range{b * cfg.BlockSize, (b + 1) * cfg.BlockSize}, cfg.BlockSize, scheduled)
		}
		if dense == scheduled || (len(rig.made) > 0) == scheduled {
			t.Errorf("scheduled %v: dense %v, %d parts made; want dense and its rest fetched only when not scheduled", scheduled, dense, len(rig.made))
		}
	}
}
