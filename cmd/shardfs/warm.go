package main

import (
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/warm"
)

// defaultWarmConcurrency keeps a node's link busy without the read-ahead
// budget of a mount behind it.
const defaultWarmConcurrency = 32

func warmCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.IntFlag{Name: "rank", Usage: "this node's rank: warm shards[rank::world]", EnvVars: env("rank", "RANK")},
		&cli.IntFlag{Name: "world", Value: 1, Usage: "number of nodes sharing the dataset", EnvVars: env("world", "WORLD_SIZE")},
		&cli.StringFlag{Name: "include", Usage: "only keys matching this glob (e.g. 'train/*.tar')", EnvVars: env("include")},
		&cli.IntFlag{Name: "concurrency", Value: defaultWarmConcurrency, Usage: "parallel part GETs", EnvVars: env("concurrency")},
		&cli.StringFlag{Name: "part-size", Value: formatSize(prefetch.DefaultPartSize), Usage: "size of each ranged GET (a multiple of --block-size)", EnvVars: env("part-size")},
	}
	flags = append(flags, s3Flags()...)
	flags = append(flags, cacheFlags()...)
	return &cli.Command{
		Name:      "warm",
		Usage:     "fill the cache with SOURCE's shards before a run (resumable)",
		ArgsUsage: "SOURCE",
		Description: "Fetches this node's shards into --cache-dir with parallel ranged GETs; blocks already cached are\n" +
			"skipped, so an interrupted warm resumes. When a running mount owns the cache dir, the work goes\n" +
			"through that mount. Exits 1 with a summary when any shard failed.",
		Flags:        flags,
		OnUsageError: usageError,
		Action:       runWarm,
	}
}

func runWarm(c *cli.Context) error {
	args, err := positional(c, "SOURCE")
	if err != nil {
		return err
	}
	dir := c.String("cache-dir")
	if dir == "" {
		return fmt.Errorf("--cache-dir is required: warm fills a cache directory")
	}
	workers := c.Int("concurrency")
	srcCfg, err := sourceConfigFrom(c, max(workers, prefetch.DefaultConcurrency))
	if err != nil {
		return err
	}
	cacheCfg, err := cacheConfigFrom(c)
	if err != nil {
		return err
	}
	var partSize int64
	if err := sizeFlags(c, map[string]*int64{"part-size": &partSize}); err != nil {
		return err
	}
	log := newLogger(c.App.ErrWriter, "warn")
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b, err := openSource(ctx, srcCfg, args[0], log)
	if err != nil {
		return err
	}
	objs, err := selectShards(b.objects, c.String("include"), c.Int("rank"), c.Int("world"))
	if err != nil {
		return err
	}
	if err := cachedir.CheckDir(dir); err != nil {
		return err // before owner.json is believed: only a dir of the user's own is
	}
	cfg := warm.Config{PartSize: partSize, Concurrency: workers}
	var res warm.Result
	if owner, ok := cachedir.ReadOwner(dir); ok {
		if owner.Source != b.retry.String() {
			return fmt.Errorf("cache dir %s is owned by a mount of %s at %s, not of %s", dir, owner.Source, owner.MountPoint, b.retry.String())
		}
		fmt.Fprintf(c.App.ErrWriter, "warming through the mount at %s (pid %d)\n", owner.MountPoint, owner.PID)
		plan := warm.PlanAll(objs)
		bar := startWarmProgress(c.App.ErrWriter, plan, &cfg)
		res = warm.ThroughMount(ctx, plan, owner.MountPoint, cfg)
		bar.Finish()
	} else {
		cc, err := openCache(ctx, cacheCfg, b, log)
		if err != nil {
			return err
		}
		defer cc.Close()
		if err := cfg.Validate(cc.BlockSize()); err != nil {
			return fmt.Errorf("--part-size: %w", err)
		}
		plan := warm.PlanCache(cc, objs)
		bar := startWarmProgress(c.App.ErrWriter, plan, &cfg)
		res, err = warm.Run(ctx, plan, b.retry, cc, cfg)
		bar.Finish()
		if err != nil {
			return err
		}
	}
	return reportWarm(c.App.Writer, res, ctx.Err())
}

// startWarmProgress starts the bar of plan's bytes to fetch, which cfg's
// Progress moves.
func startWarmProgress(w io.Writer, plan warm.Plan, cfg *warm.Config) *progressbar.ProgressBar {
	bar := startProgress(w, "warm", plan.Missing)
	cfg.Progress = func(n int64) { _ = bar.Add64(n) }
	return bar
}

// reportWarm prints r's summary and the failure of each shard that
// failed, and returns the exit: 130 when interrupted, 1 when a shard failed.
func reportWarm(w io.Writer, r warm.Result, interrupted error) error {
	rate := float64(r.Fetched) / max(r.Elapsed.Seconds(), 1e-3)
	fmt.Fprintf(w, "warmed %d shards: %s fetched, %s already cached, %s, %s/s; %d held as whole files\n",
		r.Done, formatSize(r.Fetched), formatSize(r.Skipped), r.Elapsed.Round(time.Millisecond), formatSize(int64(rate)), r.Whole)
	if interrupted != nil {
		return cli.Exit("interrupted: run warm again to resume", 130)
	}
	failed := r.FailedKeys()
	for _, k := range failed {
		fmt.Fprintf(w, "failed: %s: %v\n", k, r.Failed[k])
	}
	if len(failed) == 0 {
		return nil
	}
	return cli.Exit(fmt.Sprintf("%d of %d shards failed to warm", len(failed), r.Shards), 1)
}
