package main

import (
	"log/slog"

	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// prefetcher adapts the scheduler to what fs asks of read-ahead.
type prefetcher struct{ *prefetch.Scheduler }

func (p prefetcher) OpenStream(obj store.Object) shardfs.Stream { return p.Open(obj) }

// newPrefetcher builds the scheduler of a mount over its listing.
func newPrefetcher(cfg prefetch.Config, cc *cache.Cache, st store.Store, objs []store.Object, log *slog.Logger) *prefetch.Scheduler {
	s := prefetch.NewScheduler(cfg, st, cc, log)
	s.SetOrder(objs)
	return s
}
