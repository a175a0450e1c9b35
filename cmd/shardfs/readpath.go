package main

import (
	"log/slog"

	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// readPath adapts the engine to what fs asks of the read path.
type readPath struct{ *prefetch.Engine }

func (p readPath) OpenReader(obj store.Object, oneShot bool, opener uint32) shardfs.Reader {
	return p.Engine.OpenReader(obj, oneShot, prefetch.Opener(opener))
}

// Schedule hands a loader's schedule to the engine.
func (p readPath) Schedule(owner uint64, ranges []shardfs.ScheduledRange) shardfs.ScheduleResult {
	in := make([]prefetch.Scheduled, len(ranges))
	for i, r := range ranges {
		in[i] = prefetch.Scheduled{Obj: r.Obj, Off: r.Off, Len: r.Len}
	}
	res := p.Engine.Schedule(owner, in)
	return shardfs.ScheduleResult{
		Overlapping: res.Overlapping, Full: res.Full,
		FirstOverlapping: res.FirstOverlapping, FirstFull: res.FirstFull,
	}
}

// newPrefetcher builds the engine of a mount over its listing. Dense
// random reads fetch the rest of an object only where a cache tier keeps
// it.
func newPrefetcher(cfg prefetch.Config, cc *cache.Cache, st store.Store, objs []store.Object, log *slog.Logger) *prefetch.Engine {
	if !cc.Stats().RingEnabled && !cc.HasRAMTier() {
		cfg.DenseRandom = false
	}
	s := prefetch.NewEngine(cfg, st, cc, log)
	s.SetOrder(objs)
	return s
}
