package warm

import (
	"context"
	"fmt"
	"sync"

	"github.com/dustin/go-humanize"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// Config is how a warm runs.
type Config struct {
	PartSize    int64 // bytes of each ranged GET (and of each read of a shard), a multiple of the cache's block size
	Concurrency int   // GETs at once; as many shards are read at once
	// Progress, when set, is told of the bytes fetched (through a mount:
	// read) as they come, from many goroutines at once.
	Progress func(n int64)
}

func (cfg Config) workers() int { return max(cfg.Concurrency, 1) }

// Validate rejects a Config that cannot run over blocks of bs bytes.
func (cfg Config) Validate(bs int64) error {
	_, err := cfg.engine(bs)
	return err
}

// engine is the read-ahead configuration of a warm over blocks of bs
// bytes: a shard alone may keep every GET slot busy, and the budget holds
// as many parts as GETs run at once (a part holds its share through its
// GET and its write to the ring). A warm's reads come in order, PartSize
// each: a stream keeps the parts from ReorderWindow behind its front, so a
// read lets go of the parts before it and of none of its own. Nothing is
// prefetched beyond the shard read, nothing at random, and no block skips
// the cache.
func (cfg Config) engine(bs int64) (prefetch.Config, error) {
	if cfg.PartSize < bs || cfg.PartSize%bs != 0 {
		return prefetch.Config{}, fmt.Errorf("part size %s is not a multiple of the block size %s",
			humanize.IBytes(uint64(max(cfg.PartSize, 0))), humanize.IBytes(uint64(bs)))
	}
	pc := prefetch.DefaultConfig()
	pc.BlockSize, pc.PartSize, pc.Concurrency = bs, cfg.PartSize, cfg.workers()
	pc.MaxPrefetch = int64(cfg.workers()) * cfg.PartSize
	pc.Memory = pc.MaxPrefetch
	pc.ReorderWindow, pc.NextShards, pc.HeadSize = cfg.PartSize, 0, 0
	pc.DenseRandom, pc.SkipLaggingSink = false, false
	return pc, pc.Validate()
}

// Run carries out p into c, fetching from f (the read path's Fetcher: a
// store with its retries). Shards the ring holds whole are made whole-shard
// files first, while their blocks are still there; then the others are
// read through the engine, Concurrency at once, each made a whole-shard
// file as soon as all of it is in the ring: its blocks are then the newest
// the ring holds. When ctx ends, Run stops and returns what it did; the
// shards it was in the middle of are neither done nor failed. The error is
// for a Config that cannot work with c.
func Run(ctx context.Context, p Plan, f prefetch.Fetcher, c *cache.Cache, cfg Config) (Result, error) {
	pc, err := cfg.engine(c.BlockSize())
	if err != nil {
		return Result{}, err
	}
	rec := newRecorder(ctx, p, cfg.Progress)
	h := newHandoffs()
	eng := prefetch.NewEngine(pc, fetcher{Fetcher: f, h: h, fetched: rec.fetched}, sink{Cache: c, h: h}, nil)
	makeWhole := func(obj store.Object) {
		whole, err := c.MakeWholeFile(ctx, obj)
		rec.finish(obj.Key, whole, err)
	}
	cached, missing := p.split()
	forEach(ctx, cached, cfg.workers(), makeWhole)
	bufs := sync.Pool{New: func() any { return make([]byte, cfg.PartSize) }}
	forEach(ctx, missing, cfg.workers(), func(obj store.Object) {
		buf := bufs.Get().([]byte)
		defer bufs.Put(buf)
		if err := readShard(ctx, eng, h, obj, buf); err != nil {
			rec.finish(obj.Key, false, err)
			return
		}
		makeWhole(obj)
	})
	eng.Close()
	return rec.result(), nil
}

// readShard reads obj from its first byte to its last through eng, in
// steps of len(buf) (PartSize: parts never cross a step), and returns once
// every byte fetched for it is in the cache. A read lies inside one part
// (lent, no copy) once the window spans whole parts; before that, buf
// takes the copy.
func readShard(ctx context.Context, eng *prefetch.Engine, h *handoffs, obj store.Object, buf []byte) error {
	r := eng.OpenReader(obj, false, 0)
	defer r.Close()
	r.FillCache()
	step := int64(len(buf))
	for off := int64(0); off < obj.Size; off += step {
		_, _, release, err := r.Read(ctx, buf[:min(step, obj.Size-off)], off)
		if release != nil {
			release()
		}
		if err != nil {
			return err
		}
	}
	return h.settled(ctx, obj)
}
