package main

import (
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// prefetcher adapts the scheduler to what fs asks of read-ahead.
type prefetcher struct{ *prefetch.Scheduler }

func (p prefetcher) OpenStream(obj store.Object) shardfs.Stream { return p.Open(obj) }

// newPrefetcher builds the scheduler the read-ahead flags describe.
func newPrefetcher(c *cli.Context, cc *cache.Cache, st store.Store, objs []store.Object, log *slog.Logger) (*prefetch.Scheduler, error) {
	cfg := prefetch.Config{
		BlockSize:   cc.BlockSize(),
		Concurrency: c.Int("max-concurrency"),
		NextShards:  c.Int("prefetch-next"),
	}
	if cfg.NextShards == 0 {
		cfg.NextShards = -1 // the flag's 0 means off; the config's 0 means default
	}
	if err := sizeFlagsInto(c, map[string]*int64{"part-size": &cfg.PartSize, "max-prefetch": &cfg.MaxPrefetch, "prefetch-memory": &cfg.Memory}); err != nil {
		return nil, err
	}
	// The kernel keeps two read-ahead windows in flight and their requests
	// are answered in any order: reads land up to about twice
	// read_ahead_kb behind the furthest one. Twice that again is margin.
	if ra := c.Int("read-ahead-kb"); ra > 0 {
		cfg.ReorderWindow = max(prefetch.DefaultReorderWindow, 4*int64(ra)<<10)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("read-ahead: %w", err)
	}
	s := prefetch.NewScheduler(cfg, st, cc, log)
	s.SetOrder(objs)
	return s, nil
}
