package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/shardfs/shardfs/cache"
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
		if err := cache.CheckDir(run.CacheDir); err != nil {
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
	out, commit, err := indexOutput(c.App.Writer, run.Out)
	if err != nil {
		return err
	}
	defer commit(false)
	start := time.Now()
	failed, err := indexShards(ctx, out, c.App.ErrWriter, x, b.objects, shards, run.Concurrency)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return cli.Exit("interrupted", 130)
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d shards could not be indexed (each named above)", failed, len(shards)), 1)
	}
	if err := commit(true); err != nil {
		return err
	}
	reportIndex(c.App.ErrWriter, shards, x.Stats(), &b.meter.C, time.Since(start))
	return nil
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

// indexOutput opens where the index goes: w, or a temporary file beside
// path that commit(true) renames into place and commit(false) removes.
func indexOutput(w io.Writer, path string) (io.Writer, func(ok bool) error, error) {
	if path == "" {
		return w, func(bool) error { return nil }, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return nil, nil, fmt.Errorf("--out %s: cannot write in %s: %w", path, filepath.Dir(path), pe.Err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--out %s: %w", path, err)
	}
	done := false
	return f, func(ok bool) error {
		if done {
			return nil
		}
		done = true
		err := f.Close()
		if ok && err == nil {
			if err = os.Rename(f.Name(), path); err == nil {
				return nil
			}
		}
		os.Remove(f.Name())
		if ok {
			return fmt.Errorf("--out %s: %w", path, err)
		}
		return nil
	}, nil
}

// indexShards builds the index of each shard, n at a time, and writes
// them to out in the order of shards; each failure is one line on errOut.
func indexShards(ctx context.Context, out, errOut io.Writer, x *tarindex.Index, all, shards []store.Object, n int) (failed int, err error) {
	byKey := make(map[string]store.Object, len(all))
	for _, o := range all {
		byKey[o.Key] = o
	}
	find := func(key string) (store.Object, bool) { o, ok := byKey[key]; return o, ok }
	var total int64
	for _, o := range shards {
		total += o.Size
	}
	bar := startProgress(io.Discard, "index", total)
	if isTerminal(errOut) {
		bar = startProgress(errOut, "index", total)
	}
	type built struct {
		lines []byte
		err   error
	}
	results := make([]chan built, len(shards))
	for i := range results {
		results[i] = make(chan built, 1)
	}
	// The builds run n at a time on goroutines owned here, started in
	// shard order by one dispatcher that takes a slot of ahead first: at
	// most 4n shards are built and not yet written, so a slow first shard
	// does not pile up the indexes of all the others. They are waited for
	// once every result is written; on an interrupt this returns at once
	// and the process ends with the builds in flight.
	ahead := make(chan struct{}, 4*n)
	builders := make(chan struct{})
	go func() {
		defer close(builders)
		var g errgroup.Group
		g.SetLimit(n)
		defer g.Wait()
		for i := range shards {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			g.Go(func() error {
				b, err := x.JSONLines(ctx, shards[i], find)
				if err == nil {
					b, err = withShard(shards[i].Key, b)
				}
				bar.Add64(shards[i].Size)
				results[i] <- built{b, err}
				return nil
			})
		}
	}()
	w := bufio.NewWriterSize(out, 1<<20)
	for i, o := range shards {
		var r built
		select {
		case r = <-results[i]:
		case <-ctx.Done():
			return failed, nil
		}
		<-ahead
		if r.err != nil {
			failed++
			fmt.Fprintf(errOut, "failed: %s: %v\n", o.Key, r.err)
			continue
		}
		if _, err := w.Write(r.lines); err != nil {
			return failed, err
		}
	}
	<-builders
	bar.Finish()
	return failed, w.Flush()
}

// withShard adds "shard":key in front of each line of a rendered index.
func withShard(key string, lines []byte) ([]byte, error) {
	k, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	prefix := append(append([]byte(`{"shard":`), k...), ',')
	var out bytes.Buffer
	for len(lines) > 0 {
		line, rest, _ := bytes.Cut(lines, []byte{'\n'})
		if len(line) < 2 || line[0] != '{' {
			return nil, errors.New("malformed index line")
		}
		out.Write(prefix)
		out.Write(line[1:])
		out.WriteByte('\n')
		lines = rest
	}
	return out.Bytes(), nil
}
