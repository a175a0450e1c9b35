package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/metrics"
)

// This file is the one place that decides where a read's bytes come from
// and where fetched bytes go.
//
// A read of a handle (Reader.Read) is answered by the first of:
//
//  0. A part kept for the loader's schedule (schedule.go) that holds the
//     whole read, in flight or fetched: it is served from the part, which
//     lets go of it once its scheduled ranges are read. (A schedule's
//     parts over an object small next to the budget keep no range: they
//     go once their bytes are in the cache, and step 1 or 2 serves.)
//  1. The RAM tier, when it holds every block of the read. A one-shot read
//     (the GPU interface's READ: no page cache behind it, and no
//     later read for read-ahead to serve) looks in the ring as well, and
//     ring blocks are read from disk straight into the caller's buffer,
//     several at once, with a copy into the RAM tier's free room. So does
//     a handle reading randomly (a map-style Dataset's one pread per
//     sample): a ring block it touches is read and checked once, whole,
//     and promoted into RAM, where its other samples are found; through a
//     part, every sample of the block would read and check it again.
//     Once the RAM tier is full, a random read inside one ring block
//     reads and checks only the 4 KiB grains of it that the read lies in
//     (Cache.ReadChunks), through the page cache, and promotes nothing.
//  2. The handle's stream: the part that covers the read, in flight or
//     fetched ahead, or one made now. A part covers a run of blocks that
//     the ring holds, read from the ring, or that it does not, fetched
//     with one ranged GET; read-ahead leaves out blocks in the RAM tier,
//     which step 1 serves when the reader gets there (partSource). A part
//     read from the ring whose blocks the ring lost since falls back to
//     the store from the first missing block on (fellBackToStore).
//
// The tier reported for the read is metrics.TierCache for steps 1 and for
// parts read from the ring, metrics.TierNetwork for parts that waited on
// a GET.
//
// Random reads of one object, across its handles, are sparse or dense
// (Classify, dense.go). Sparse: each fetches only the blocks it touches,
// each block whole and into the cache even once the reader has gone on
// (forMissedRead).
// Dense (a map-style epoch: reads keep landing on new blocks, or the
// object is small next to the budget): the rest of the object is fetched
// in the background in PartSize GETs, a few at once (denseRest,
// denserest.go), and put where the next reads find it; a read of a
// block still on its way waits on that part, a read of a block no part
// covers fetches from its block to the end of its part (denseRest.need), a
// read of a block that arrived finds it in the cache (step 1).
// An object larger than all the cache can keep (Cache.Room) stays sparse:
// its rest, fetched ahead of the reads, would push out what came first.
//
// What a part fetched goes to the cache with the placement its purpose
// gives (purpose.placement): the ring alone for read-ahead and sequential readers (they read
// it from the part, and the page cache keeps it), RAM and ring for random
// readers (they come back for single blocks), for the background parts
// of a dense object, whose reads are random, and for parts made for a
// loader's schedule, whose other samples in the same blocks come later.
// A dense or scheduled part read from the ring is copied into RAM as it is
// read (purpose.ringPlacement). Read-ahead goes to the cache only while the cache
// keeps up: when the parts it has yet to take hold half the budget, a
// disk slower than the network, the rest are served and not cached
// (sinkLagsLocked), unless a reader that fills the cache is open.
//
// While a loader's schedule names ranges of an object, queued or kept, its
// reads neither read ahead nor turn it dense (schedule.namesLocked, ahead.go):
// the schedule says what is read next.

// Read answers len(p) bytes at off, io.ReaderAt's way: short only at the
// end of the object, with io.EOF. data is p[:n], or bytes the read path
// lends so that a FUSE reply is written from them without a copy: a cache
// block (never written again, so release is nil) or a pinned part, which
// release (then not nil) lets go; the caller calls a non-nil release
// exactly once, also when err is not nil, and as soon as it can: a lent
// part counts against the read-ahead budget. tier is where the bytes came
// from, for metrics.
//
// The read is asked of each of readSources in turn; the first that holds
// it answers, the others answer errNotHere.
func (r *Reader) Read(ctx context.Context, p []byte, off int64) (data []byte, tier string, release func(), err error) {
	if off >= r.obj.Size || len(p) == 0 {
		return nil, metrics.TierCache, nil, io.EOF
	}
	rd := readRequest{p: p, off: off}
	rd.q, rd.short = clip(r.obj, p, off)
	for _, src := range readSources {
		a, err := src(r, ctx, rd)
		if err != errNotHere {
			return a.data, a.tier, a.release, err
		}
	}
	panic("prefetch: no read source answered") // the stream always does
}

// readRequest is one read as the sources see it: p at off, and q, p cut
// at the end of the object (short says it was).
type readRequest struct {
	p, q  []byte
	off   int64
	short bool
}

// answer is a source's reply to a read (Read's results but the error).
type answer struct {
	data    []byte
	tier    string
	release func()
}

// errNotHere is a source's answer to a read it does not hold: the next
// source is asked.
var errNotHere = errors.New("prefetch: not held by this source")

// readSources are the places a read is answered from, in order (steps 0
// to 2 above).
var readSources = [...]func(*Reader, context.Context, readRequest) (answer, error){
	(*Reader).fromSchedule,
	(*Reader).fromTiers,
	(*Reader).fromStream,
}

// fromSchedule answers a read that lies in one part kept for the loader's
// schedule from that part (step 0), rather than read a ring block for it.
func (r *Reader) fromSchedule(ctx context.Context, rd readRequest) (answer, error) {
	if !r.s.heldBySchedule(r.obj, rd.off, rd.off+int64(len(rd.q))) {
		return answer{}, errNotHere
	}
	return r.fromStream(ctx, rd)
}

// fromTiers answers a read that the cache tiers hold whole (step 1). The
// stream still hears of it, so that its read-ahead keeps pace with the
// reader and next-shard prefetch fires on cached shards too.
func (r *Reader) fromTiers(_ context.Context, rd readRequest) (answer, error) {
	data, ok := r.readRAMOrRing(rd.q, rd.off)
	if !ok {
		return answer{}, errNotHere
	}
	if st := r.openStream(); st != nil {
		st.Observe(rd.off, int64(len(data)))
	}
	a := answer{data: data, tier: metrics.TierCache}
	if rd.short {
		return a, io.EOF
	}
	return a, nil
}

// fromStream answers a read from the handle's stream (step 2): the part
// that covers it, in flight or fetched ahead, or one made now.
func (r *Reader) fromStream(ctx context.Context, rd readRequest) (answer, error) {
	st := r.openStream()
	if st == nil {
		return answer{tier: metrics.TierNetwork}, fmt.Errorf("read %s: handle released: %w", r.obj.Key, context.Canceled)
	}
	data, fromRing, release, err := st.ReadShared(ctx, rd.p, rd.off)
	return answer{data: data, tier: tierOf(fromRing), release: release}, err
}

// readRAMOrRing serves q when every block of it is in the tiers readTiers
// names. A read inside one block reads the whole block once into the
// handle's lastBlock and is answered with the block's own bytes; a read
// that spans blocks is copied into q.
func (r *Reader) readRAMOrRing(q []byte, off int64) ([]byte, bool) {
	c := r.s.cache
	if c == nil {
		return nil, false
	}
	random := r.readsRandomly(off)
	tiers := readTiers(r.oneShot, random)
	if random && !r.oneShot && c.RAMFree() < r.s.cfg.BlockSize {
		// The RAM tier is full: a ring block promoted for this read
		// would push out another that a later read comes back for (an
		// object larger than the tier, read at random). A read inside
		// one block then reads and checks only the grains it lies in.
		if data, ok := r.readBlockwise(q, off, cache.InRAM); ok {
			return data, true
		}
		if _, ok := c.ReadChunks(r.obj, q, off); ok {
			return q, true
		}
	}
	if data, ok := r.readBlockwise(q, off, tiers); ok {
		return data, true
	}
	if r.oneShot || r.s.sharedRAM && tiers.Has(cache.InRing) {
		// Megabytes at a time: disk blocks go straight into q, several
		// at once, with no block buffer. A shared RAM tier's blocks are
		// copied out of their slots the same way (Get would copy each
		// whole first).
		_, ok := c.ReadAt(r.obj, q, off, readPlacement(r.oneShot))
		return q, ok
	}
	bs := r.s.cfg.BlockSize
	end := off + int64(len(q))
	for index := off / bs; index*bs < end; index++ {
		data, _, ok := c.Get(r.obj, index, tiers)
		if !ok {
			return nil, false
		}
		start := index * bs
		lo, hi := max(off, start), min(end, start+bs)
		if int64(len(data)) < hi-start { // not the whole block: never serve a short copy
			return nil, false
		}
		copy(q[lo-off:hi-off], data[lo-start:hi-start])
	}
	return q, true
}

// readTiers are the cache tiers step 1 looks in. A sequential handle
// leaves ring blocks to its parts, which read a run of them ahead of it
// and several at once; Get would read one at a time, in its way.
func readTiers(oneShot, random bool) cache.Tier {
	if oneShot || random {
		return cache.InRAM | cache.InRing
	}
	return cache.InRAM
}

// readsRandomly reports whether the handle reads randomly: its stream's
// policy says so, or, before its first read, the read is not at offset 0
// (where the policy starts a stream at once).
func (r *Reader) readsRandomly(off int64) bool {
	r.mu.Lock()
	st := r.stream
	r.mu.Unlock()
	if st == nil {
		return off != 0
	}
	return !st.Sequential()
}

// readPlacement is what a cache read spanning blocks does with ring blocks.
func readPlacement(oneShot bool) cache.Placement {
	if oneShot {
		return cache.ForOneShot
	}
	return cache.ForRandomRead
}

// tierOf names, for metrics, where a stream read's bytes came from.
func tierOf(fromRing bool) string {
	if fromRing {
		return metrics.TierCache
	}
	return metrics.TierNetwork
}

// partSource is where the next part of o from start (block-aligned) comes
// from: the run of blocks up to limit that no part covers (partTable.gap), cut
// where the cache starts or stops holding its blocks, so that a part over
// the result is read whole from the ring (fromRing) or whole from the
// store. With readAhead, a gap that starts at a block the RAM tier holds
// comes back empty, starting and ending at that block, and a gap is cut
// before such a block; so does a gap that overlaps a range whose GET just
// failed (failed.go). Called with s.mu held.
func (s *Engine) partSource(o *object, start, limit int64, readAhead bool) (r Range, fromRing bool) {
	obj, gap := o.obj, s.parts.gap(o, start, limit)
	if readAhead && !gap.Empty() && s.parts.failure(obj, gap) != nil {
		// A range that just failed gets no read-ahead: its reads fetch
		// it, or fail, themselves (failed.go).
		return Range{gap.Start, gap.Start}, false
	}
	if s.cache == nil || gap.Empty() {
		return gap, false
	}
	bs := s.cfg.BlockSize
	held := s.cache.Lookup(obj, gap.Start/bs)
	if readAhead && held.Has(cache.InRAM) {
		return Range{gap.Start, gap.Start}, false
	}
	fromRing = held != cache.NotCached
	for b := gap.Start + bs; b < gap.End; b += bs {
		t := s.cache.Lookup(obj, b/bs)
		if (t != cache.NotCached) != fromRing || (readAhead && t.Has(cache.InRAM)) {
			return Range{gap.Start, b}, fromRing
		}
	}
	return gap, fromRing
}

// fellBackToStore records that p, made to be read from the ring, is
// fetched from the store after all; before any fetched byte arrives, so
// that reads do not count those as served from the cache.
func (g *getPool) fellBackToStore(p *part) {
	g.mu.Lock()
	p.fromRing = false
	g.mu.Unlock()
}

// streamPurpose is why a stream makes a part: for its reader's read
// (forRead) or ahead of it. A random reader's read that the ring cannot
// serve is kept until its bytes are in the cache, when there is one: the
// reader goes on to other blocks once its own bytes arrived; the block's
// other samples are read later, from the cache.
func (s *Engine) streamPurpose(forRead, sequential, fromRing bool) purpose {
	switch {
	case !forRead:
		return forWindow
	case sequential:
		return forStreamRead
	case !fromRing && s.cache != nil:
		return forMissedRead
	}
	return forRandomRead
}

// sinkLagsLocked reports whether p's bytes skip the cache because it takes
// blocks more slowly than the store brings them: p is read-ahead (its
// reader keeps its own copy), Config.SkipLaggingSink is set, no reader
// fills the cache, and the parts still being handed to the cache would,
// with p, hold more than a sinkLagShare of the budget (one part may always
// wait, whatever the budget). Parts wait pinned
// until Keep returns, so a disk slower than the network would
// otherwise fill the budget with them and hold every reader to the
// disk's pace; a skipped block is fetched again on the next pass, when
// the disk may take it.
func (g *getPool) sinkLagsLocked(p *part, place cache.Placement) bool {
	return g.cfg.SkipLaggingSink && g.fillers == 0 && place == cache.ForReadAhead &&
		g.sinking > 0 && g.sinkingBytes+p.size > g.cfg.Memory/sinkLagShare
}
