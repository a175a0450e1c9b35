package prefetch

import "github.com/shardfs/shardfs/store"

// denseRest fetches, in the background, the rest of each object that
// random reads use densely (the density rule, Classify in dense.go, which
// decides): it owns the blocks random reads touched per object, the
// objects whose rest is still to fetch, in the order they turned dense,
// and its counters. It is never asked for a victim: its parts are few
// (denseInFlight), capped at half the budget, and kept only until their
// bytes are in the cache (forDenseRest), which a read that waits would
// otherwise fetch again. Guarded by Engine.mu.
type denseRest struct {
	maker
	cache  Cache                      // nil when there is none: Room is 0, and no object turns dense
	access map[objectID]*randomAccess // blocks random reads touched, per object
	queue  []denseFetch               // objects whose rest is fetched, in the order they turned dense
	stats  DenseStats
}

// denseFetch is the background fetch of the rest of an object that random
// reads use densely: parts are made from next on as the budget allows.
type denseFetch struct {
	obj  store.Object
	next int64
}

// closeLocked drops the objects still queued: the engine closed.
func (d *denseRest) closeLocked() { d.queue = nil }

// noteLocked records a random read of asked bytes of o over the blocks
// need, starts the background fetch of the rest of o when the density rule
// says its random reads are dense, and reports whether they are.
// scheduled says the loader's schedule names o (schedule.namesLocked):
// its reads are the schedule's, and o never turns dense.
func (d *denseRest) noteLocked(o *object, need Range, asked int64, scheduled bool) (dense bool) {
	bs := d.cfg.BlockSize
	blocks := ceilTo(o.obj.Size, bs) / bs
	if !d.cfg.DenseRandom || need.Empty() || blocks > maxTrackedBlocks || scheduled {
		return false
	}
	id := objectID{o.obj.Key, o.obj.ETag}
	a := d.access[id]
	if a == nil {
		if len(d.access) >= maxTrackedObjects {
			clear(d.access)
		}
		a = &randomAccess{touched: newBitset(blocks)}
		d.access[id] = a
	}
	if a.dense {
		return true
	}
	landedNew := false
	for b := need.Start / bs; b*bs < need.End; b++ {
		landedNew = a.touch(b) || landedNew
	}
	if landedNew {
		a.taken += asked
	}
	room := int64(0)
	if d.cache != nil {
		room = d.cache.Room()
	}
	if Classify(RandomAccess{Size: o.obj.Size, BlockSize: bs, Budget: d.cfg.Memory, Touched: a.count, Room: room, Taken: a.taken}) != Dense {
		return false
	}
	a.dense = true
	d.stats.DenseObjects++
	d.queue = append(d.queue, denseFetch{obj: o.obj})
	d.pumpLocked()
	return true
}

// need widens need, the blocks a random read of a dense object
// touches, to the end of their part. The read's GET starts at its own
// block, so it waits for no byte before it, and brings the blocks after it
// that the background fetch would otherwise ask for in a GET of their own:
// the store's cost is per request (pumpLocked). Blocks a part or the
// cache already holds stay out (window.coverLocked). Fewer GETs for the
// same bytes, and reads that wait less. need is not empty: noteLocked
// calls no empty read dense.
func (d *denseRest) need(o *object, need Range) Range {
	need.End = min(max(need.End, ceilTo(need.Start+1, d.cfg.PartSize)), o.obj.Size)
	return need
}

// denseInFlight bounds the background parts of dense objects out at once,
// in parts of PartSize (128 MiB at the defaults): enough GETs to fill a
// link on which each connection is slow (a remote region's rate per
// connection), few enough that a read seldom lands on a block behind a
// part's front.
const denseInFlight = 16

// fits reports whether a background part of size bytes may be made: at
// most denseInFlight parts' worth of bytes out, within half the budget,
// and no read waiting for budget: reads come first, and the rest of the
// budget stays with streams.
func (d *denseRest) fits(size int64) bool {
	limit := min(d.cfg.Memory/2, denseInFlight*d.cfg.PartSize)
	return d.budget.classFits(classDense, size, limit)
}

// pumpLocked makes the parts of objects read densely, in order, a
// PartSize part per GET, while they fit. Blocks the RAM tier holds are
// left out; blocks in the ring are read from there into RAM.
//
// Few long GETs, not many short ones: the store spends most of its CPU
// per request, not per byte, and so does the client, so the same bytes
// in longer GETs cost both sides less. A read of a
// block still on its way waits for the bytes before it in its part; with
// few parts out, most reads that miss land on blocks no part covers yet
// and get a GET of their own that starts at their block (need).
func (d *denseRest) pumpLocked() {
	for len(d.queue) > 0 && !d.closed() {
		f := &d.queue[0]
		o := d.parts.object(f.obj)
		for f.next < f.obj.Size {
			if p := d.parts.partAt(o, f.next); p != nil {
				f.next = p.end
				continue
			}
			gap, cached := d.source(o, f.next, f.next+d.cfg.PartSize, true)
			if gap.Empty() {
				f.next = gap.End + d.cfg.BlockSize
				continue
			}
			if cached && d.cache.RAMFree() < gap.Len() {
				// The ring holds these blocks and the RAM tier has no
				// room for them: copied there, they would push out
				// blocks read before them. Reads find them in the
				// ring, a grain at a time.
				f.next = gap.End
				continue
			}
			if !d.fits(d.cfg.chargeOf(gap)) {
				d.parts.tidy(o)
				return
			}
			d.newPart(o, gap, Range{}, cached, forDenseRest)
			d.stats.DenseParts++
			f.next = gap.End
		}
		d.parts.tidy(o)
		d.queue[0] = denseFetch{}
		d.queue = d.queue[1:]
	}
}
