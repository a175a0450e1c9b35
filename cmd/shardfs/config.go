package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/cgroup"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/listing"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/tarindex"
)

// This file is the one place where flags become configuration: each
// command's Action reads its flags here into the typed Config of every
// package it wires, validated, and hands those on. Nothing below the
// Actions sees the CLI library. Flag defaults are the packages' own
// defaults, and a flag's zero means what the Config's zero means.

// sourceConfig is how to reach and list a source.
type sourceConfig struct {
	S3      store.S3Options
	Retry   store.RetryPolicy
	Listing listing.Config // manifest, persisted copy and TTL
}

func (c sourceConfig) Validate() error {
	if err := c.S3.Validate(); err != nil {
		return err
	}
	if err := c.Listing.Validate(); err != nil {
		return fmt.Errorf("--manifest, --metadata-ttl: %w", err)
	}
	return c.Retry.Validate()
}

// sourceConfigFrom reads the S3 flags. gets is how many GETs the command
// runs at once: the client's connection pool keeps twice that.
func sourceConfigFrom(c *cli.Context, gets int) (sourceConfig, error) {
	cfg := sourceConfig{S3: store.DefaultS3Options(), Retry: store.DefaultRetryPolicy(), Listing: listing.DefaultConfig()}
	cfg.S3.Endpoint = c.String("endpoint-url")
	cfg.S3.Region = c.String("region")
	cfg.S3.Profile = c.String("profile")
	cfg.S3.ForcePathStyle = c.Bool("force-path-style")
	if cfg.S3.Endpoint != "" && !c.IsSet("force-path-style") {
		cfg.S3.ForcePathStyle = true
	}
	cfg.S3.StallTimeout = c.Duration("stall-timeout")
	cfg.S3.ListStreams = c.Int("list-streams")
	cfg.S3.MaxConns = 2 * gets
	cfg.Retry.Budget = c.Duration("retry-timeout")
	if hasFlag(c, "manifest") {
		cfg.Listing.Manifest = c.String("manifest")
	}
	if hasFlag(c, "metadata-ttl") {
		cfg.Listing.TTL = c.Duration("metadata-ttl")
	}
	return cfg, cfg.Validate()
}

// cacheConfigFrom reads the cache flags.
func cacheConfigFrom(c *cli.Context) (cache.Config, error) {
	cfg := cache.Config{Dir: c.String("cache-dir"), WholeShardPercent: c.Int("whole-shard-percent")}
	err := sizeFlags(c, map[string]*int64{"cache-size": &cfg.Size, "memory-cache-size": &cfg.MemorySize, "block-size": &cfg.BlockSize})
	if err != nil {
		return cfg, err
	}
	// Without --cache-size an existing ring keeps its own size, so a mount
	// uses what `shardfs warm --cache-size X` filled.
	cfg.SizeGiven = c.IsSet("cache-size")
	return cfg, cfg.Validate()
}

// The values of --cache-lag.
const (
	cacheLagSkip = "skip"
	cacheLagWait = "wait"
)

// prefetchConfigFrom reads the read-ahead flags; blocks are the cache's.
func prefetchConfigFrom(c *cli.Context, blockSize int64) (prefetch.Config, error) {
	cfg := prefetch.DefaultConfig()
	cfg.BlockSize = blockSize
	cfg.Concurrency = c.Int("max-concurrency")
	cfg.NextShards = c.Int("prefetch-next")
	switch lag := c.String("cache-lag"); lag {
	case cacheLagSkip, cacheLagWait:
		cfg.SkipLaggingSink = lag == cacheLagSkip
	default:
		return cfg, fmt.Errorf("--cache-lag %q: want %s or %s", lag, cacheLagSkip, cacheLagWait)
	}
	if err := sizeFlags(c, map[string]*int64{"part-size": &cfg.PartSize, "max-prefetch": &cfg.MaxPrefetch, "prefetch-memory": &cfg.Memory}); err != nil {
		return cfg, err
	}
	// The kernel keeps two read-ahead windows in flight and their requests
	// are answered in any order: reads land up to about twice
	// read_ahead_kb behind the furthest one. Twice that again is margin.
	if ra := c.Int("read-ahead-kb"); ra > 0 {
		cfg.ReorderWindow = max(prefetch.DefaultReorderWindow, 4*int64(ra)<<10)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("read-ahead: %w", err)
	}
	return cfg, nil
}

// mountConfig is everything `shardfs mount` configures.
type mountConfig struct {
	Source      sourceConfig
	Cache       cache.Config
	Prefetch    prefetch.Config
	Kernel      shardfs.KernelOptions
	PageCache   pageCacheChoice
	SharedRAM   sharedRAMChoice
	Passthrough shardfs.Passthrough
	UID, GID    uint32
	MetricsAddr string
	LogFile     string
	LogLevel    string
}

// indexConfigFor is where the member indexes of source persist: in the
// cache dir beside the cached blocks, or nowhere when dir is "".
func indexConfigFor(dir, source string, log *slog.Logger) tarindex.Config {
	cfg := tarindex.DefaultConfig()
	cfg.Dir, cfg.Source, cfg.Log = dir, source, log
	return cfg
}

func mountConfigFrom(c *cli.Context) (cfg mountConfig, err error) {
	if cfg.Source, err = sourceConfigFrom(c, c.Int("max-concurrency")); err != nil {
		return cfg, err
	}
	if cfg.Cache, err = cacheConfigFrom(c); err != nil {
		return cfg, err
	}
	cfg.Source.Listing.Dir = cfg.Cache.Dir // listings persist beside the cached blocks
	if cfg.Prefetch, err = prefetchConfigFrom(c, cfg.Cache.BlockSize); err != nil {
		return cfg, err
	}
	if cfg.Prefetch.Memory, cfg.Cache.MemorySize, err = memoryBudgetsFrom(c, cfg.Prefetch, cfg.Cache); err != nil {
		return cfg, err
	}
	cfg.Kernel = shardfs.DefaultKernelOptions()
	cfg.Kernel.ReadAheadKB = c.Int("read-ahead-kb")
	cfg.Kernel.MaxBackground = c.Int("max-background")
	cfg.Kernel.AllowOther = c.Bool("allow-other")
	cfg.Kernel.Debug = c.Bool("debug-fuse")
	if cfg.PageCache, err = parsePageCache(c.String("page-cache")); err != nil {
		return cfg, fmt.Errorf("--page-cache: %w", err)
	}
	if cfg.SharedRAM, err = parseSharedRAM(c.String("memory-cache-shared")); err != nil {
		return cfg, fmt.Errorf("--memory-cache-shared: %w", err)
	}
	if cfg.Passthrough, err = shardfs.ParsePassthrough(c.String("passthrough")); err != nil {
		return cfg, fmt.Errorf("--passthrough: %w", err)
	}
	cfg.UID, cfg.GID = uint32(c.Int("uid")), uint32(c.Int("gid"))
	cfg.MetricsAddr = c.String("metrics-addr")
	cfg.LogFile = c.String("log-file")
	cfg.LogLevel = c.String("log-level")
	return cfg, nil
}

// memoryBudgetsFrom is the read-ahead budget and the RAM tier sized to
// --memory-target or to the daemon's cgroup memory limit (sizeMemory),
// from the budgets pf and cc hold and which of them the user set. A cgroup
// the daemon cannot read counts as none, so the budgets are then the
// flags', as on a host without a limit.
func memoryBudgetsFrom(c *cli.Context, pf prefetch.Config, cc cache.Config) (prefetchMemory, ramTier int64, err error) {
	ask := memoryAsk{
		Prefetch: pf.Memory, PrefetchSet: c.IsSet("prefetch-memory"),
		RAM: cc.MemorySize, RAMSet: c.IsSet("memory-cache-size"),
		PartSize: pf.PartSize,
	}
	if s := c.String("memory-target"); s != "" {
		if ask.Target, err = parseSize(s); err != nil {
			return 0, 0, fmt.Errorf("--memory-target: %w", err)
		}
	}
	if limit, err := cgroup.MemoryLimit(); err == nil {
		ask.Limit = limit
	}
	return sizeMemory(ask)
}

// sizeFlags reads size flags into their destinations, naming the flag in
// an error.
func sizeFlags(c *cli.Context, dst map[string]*int64) error {
	for name, p := range dst {
		v, err := parseSize(c.String(name))
		if err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		*p = v
	}
	return nil
}

// hasFlag reports whether the running command defines flag name.
func hasFlag(c *cli.Context, name string) bool {
	for _, f := range c.Command.Flags {
		if f.Names()[0] == name {
			return true
		}
	}
	return false
}

// defaultUID and defaultGID own every file unless --uid/--gid say otherwise.
var defaultUID, defaultGID = os.Getuid(), os.Getgid()
