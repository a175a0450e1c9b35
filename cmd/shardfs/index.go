package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/tarindex"
)

// defaultIndexConcurrency is how many shards are indexed at once: each
// build is a chain of small GETs, one at a time, so shards are the
// parallelism.
const defaultIndexConcurrency = 16

func indexCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write the index to FILE (written whole, or not at all) instead of stdout", EnvVars: env("index-out")},
		&cli.StringFlag{Name: "include", Usage: "only .tar keys matching this glob (e.g. 'train/*.tar')", EnvVars: env("include")},
		&cli.IntFlag{Name: "concurrency", Value: defaultIndexConcurrency, Usage: "shards indexed at once", EnvVars: env("concurrency")},
		&cli.StringFlag{Name: "cache-dir", Usage: "also persist each shard's index here, where a mount with this --cache-dir serves it with no store read", EnvVars: env("cache-dir"), Category: "Cache"},
	}
	flags = append(flags, s3Flags()...)
	return &cli.Command{
		Name:      "index",
		Usage:     "write the member index of every .tar shard under SOURCE as JSON lines",
		ArgsUsage: "SOURCE",
		Description: "One line per regular member of each shard, shards in key order, members in archive order:\n" +
			`{"shard":KEY,"name":MEMBER,"offset":DATA_OFFSET,"size":BYTES}, the lines of the mount's` + "\n" +
			"/.shardfs/index/KEY with the shard's key added. Only tar headers are read (small ranged GETs), or a\n" +
			"wds2idx sidecar index beside a shard after a check. Exits 1, writing no --out file, when a shard\n" +
			"cannot be indexed.",
		Flags:        flags,
		OnUsageError: usageError,
		Action:       runIndex,
	}
}

// indexRun is what `shardfs index` does, read from its flags.
type indexRun struct {
	Source      sourceConfig
	CacheDir    string
	Out         string
	Include     string
	Concurrency int
}

func (r indexRun) Validate() error {
	if r.Concurrency < 1 {
		return fmt.Errorf("--concurrency %d: want at least 1", r.Concurrency)
	}
	return nil
}

func indexRunFrom(c *cli.Context) (indexRun, error) {
	r := indexRun{CacheDir: c.String("cache-dir"), Out: c.String("out"), Include: c.String("include"), Concurrency: c.Int("concurrency")}
	if err := r.Validate(); err != nil {
		return r, err
	}
	var err error
	r.Source, err = sourceConfigFrom(c, r.Concurrency)
	return r, err
}

func runIndex(c *cli.Context) error {
	args, err := positional(c, "SOURCE")
	if err != nil {
		return err
	}
	run, err := indexRunFrom(c)
	if err != nil {
		return err
	}
	log := newLogger(c.App.ErrWriter, "warn")
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if run.CacheDir != "" {
		if err := cachedir.CheckDir(run.CacheDir); err != nil {
			return err
		}
	}
	b, err := openSource(ctx, run.Source, args[0], log)
	if err != nil {
		return err
	}
	shards, err := tarShards(b.objects, run.Include)
	if err != nil {
		return err
	}
	if len(shards) == 0 && run.Include != "" {
		return fmt.Errorf("no .tar shard under %s matches --include %s", b.retry, run.Include)
	}
	if len(shards) == 0 {
		return fmt.Errorf("no .tar shard under %s", b.retry)
	}
	x, err := tarindex.New(b.retry, indexConfigFor(run.CacheDir, b.retry.String(), log))
	if err != nil {
		return err
	}
	start := time.Now()
	failed, err := writeIndex(ctx, c.App.Writer, c.App.ErrWriter, x, b.objects, shards, run)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return cli.Exit("interrupted", 130)
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d shards could not be indexed (each named above)", failed, len(shards)), 1)
	}
	reportIndex(c.App.ErrWriter, shards, x.Stats(), &b.meter.C, time.Since(start))
	return nil
}

// writeIndex writes the index of shards to run.Out (whole, or not at all)
// or to out, each shard that fails named on errOut, with a progress bar
// on errOut when it is a terminal.
func writeIndex(ctx context.Context, out, errOut io.Writer, x *tarindex.Index, all, shards []store.Object, run indexRun) (int, error) {
	var total int64
	for _, o := range shards {
		total += o.Size
	}
	bar := startProgress(io.Discard, "index", total)
	if isTerminal(errOut) {
		bar = startProgress(errOut, "index", total)
	}
	batch := tarindex.Batch{
		Index: x, Find: tarindex.FinderOf(all), Concurrency: run.Concurrency,
		Built:  func(o store.Object) { bar.Add64(o.Size) },
		Failed: func(o store.Object, err error) { fmt.Fprintf(errOut, "failed: %s: %v\n", o.Key, err) },
	}
	write := func() (int, error) { return batch.Write(ctx, out, shards) }
	if run.Out != "" {
		write = func() (int, error) { return batch.WriteFile(ctx, run.Out, shards) }
	}
	failed, err := write()
	if err != nil && run.Out != "" {
		return failed, fmt.Errorf("--out %s: %w", run.Out, err)
	}
	bar.Finish()
	return failed, err
}

// reportIndex is the closing line: what indexing cost the store, and
// where the indexes came from.
func reportIndex(w io.Writer, shards []store.Object, s tarindex.Stats, c *store.Counters, took time.Duration) {
	var total int64
	for _, o := range shards {
		total += o.Size
	}
	fmt.Fprintf(w, "indexed %d shards (%s) in %s: %d bytes fetched in %d GETs; %d from the cache dir, %d from sidecars, %d scanned\n",
		len(shards), formatSize(total), took.Round(time.Millisecond), c.BytesRead.Load(), c.GETs.Load(), s.Persisted, s.Sidecars, s.Scans)
}

// tarShards keeps the .tar objects matching include.
func tarShards(objs []store.Object, include string) ([]store.Object, error) {
	var tars []store.Object
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".tar") {
			tars = append(tars, o)
		}
	}
	return selectShards(tars, include, 0, 1)
}
