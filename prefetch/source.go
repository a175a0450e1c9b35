package prefetch

import (
	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/store"
)

// This file is the one place that decides where a read's bytes come from
// and where fetched bytes go.
//
// A read of a handle (Reader.Read) is answered by the first of:
//
//  1. The RAM tier, when it holds every block of the read. A one-shot read
//     (the GPU side interface's READ: no page cache behind it, and no
//     later read for read-ahead to serve) looks in the ring as well, and
//     ring blocks are read from disk straight into the caller's buffer,
//     several at once, with a copy into the RAM tier's free room.
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
// What a part fetched goes to the cache with the placement placementOf
// gives: the ring alone for read-ahead and sequential readers (they read
// it from the part, and the page cache keeps it), RAM and ring for random
// readers (they come back for single blocks).

// readTiers are the cache tiers step 1 looks in.
func readTiers(oneShot bool) cache.Tier {
	if oneShot {
		return cache.InRAM | cache.InRing
	}
	return cache.InRAM
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

// partSource cuts gap (block-aligned) where the cache starts or stops
// holding its blocks, so that a part over the result is read whole from the
// ring (fromRing) or whole from the store. With readAhead, a gap that
// starts at a block the RAM tier holds comes back empty, starting and
// ending at that block, and a gap is cut before such a block. Called with
// s.mu held.
func (s *Scheduler) partSource(obj store.Object, gap Range, readAhead bool) (r Range, fromRing bool) {
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
func (s *Scheduler) fellBackToStore(p *part) {
	s.mu.Lock()
	p.fromCache = false
	s.mu.Unlock()
}

// placementOf is where the bytes p fetched go in the cache.
func placementOf(p *part) cache.Placement {
	if p.ahead || p.streamed {
		return cache.ForReadAhead
	}
	return cache.ForRandomRead
}
