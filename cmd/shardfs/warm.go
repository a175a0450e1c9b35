package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/cache/cachedir"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
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

// warmResult is what a warm reports at the end. Workers record into it
// concurrently through record.
type warmResult struct {
	shards  int
	skipped int64 // bytes already cached
	elapsed time.Duration

	mu      sync.Mutex
	fetched int64            // bytes fetched now
	whole   int              // shards kept as whole-shard files
	failed  map[string]error // first failure of each shard
}

// recordWhole counts a shard kept whole, or its failure to be.
func (r *warmResult) recordWhole(key string, ok bool, err error) {
	r.record(key, 0, err)
	if ok {
		r.mu.Lock()
		r.whole++
		r.mu.Unlock()
	}
}

func (r *warmResult) record(key string, n int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetched += n
	if _, seen := r.failed[key]; err != nil && !seen {
		r.failed[key] = err
	}
}

// forEach runs work over items, n at a time, until done or ctx ends.
func forEach[T any](ctx context.Context, items []T, n int, work func(T)) {
	var g errgroup.Group
	g.SetLimit(max(n, 1))
	for _, item := range items {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { work(item); return nil })
	}
	g.Wait()
}

// buffers hands out reusable buffers of one size.
func buffers(size int64) *sync.Pool {
	return &sync.Pool{New: func() any { return make([]byte, size) }}
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
	var res *warmResult
	if owner, ok := cachedir.ReadOwner(dir); ok {
		if owner.Source != b.retry.String() {
			return fmt.Errorf("cache dir %s is owned by a mount of %s at %s, not of %s", dir, owner.Source, owner.MountPoint, b.retry.String())
		}
		fmt.Fprintf(c.App.ErrWriter, "warming through the mount at %s (pid %d)\n", owner.MountPoint, owner.PID)
		res = warmThroughMount(ctx, c.App.ErrWriter, owner.MountPoint, objs, workers, int(partSize))
	} else {
		cc, err := openCache(ctx, cacheCfg, b, log)
		if err != nil {
			return err
		}
		defer cc.Close()
		res, err = warmCache(ctx, c.App.ErrWriter, b.retry, cc, objs, partSize, workers)
		if err != nil {
			return err
		}
	}
	return reportWarm(c.App.Writer, res, ctx.Err())
}

// warmCache fetches every uncached part of objs into c.
func warmCache(ctx context.Context, out io.Writer, st store.Store, c *cache.Cache, objs []store.Object, partSize int64, workers int) (*warmResult, error) {
	bs := c.BlockSize()
	if partSize < bs || partSize%bs != 0 {
		return nil, fmt.Errorf("--part-size %s is not a multiple of the block size %s", formatSize(partSize), formatSize(bs))
	}
	res := &warmResult{shards: len(objs), failed: map[string]error{}}
	type part struct {
		obj      store.Object
		off, len int64
	}
	var todo []part
	var total int64
	var cached []store.Object          // every block in the ring already
	left := map[string]*atomic.Int64{} // parts of a shard still to fetch
	for _, o := range objs {
		parts := int64(0)
		for off := int64(0); off < o.Size; off += partSize {
			n := min(partSize, o.Size-off)
			if partCached(c, o, off, n, bs) {
				res.skipped += n
				continue
			}
			todo = append(todo, part{o, off, n})
			total += n
			parts++
		}
		left[o.Key] = new(atomic.Int64)
		left[o.Key].Store(parts)
		if parts == 0 {
			cached = append(cached, o)
		}
	}
	start := time.Now()
	bar := startProgress(out, "warm", total)
	// A shard is made whole from the ring as soon as all of it is there:
	// its blocks are the newest the ring holds.
	makeWhole := func(o store.Object) {
		ok, err := c.MakeWholeFile(ctx, o)
		res.recordWhole(o.Key, ok, err)
	}
	forEach(ctx, cached, workers, makeWhole)
	bufs := buffers(partSize)
	forEach(ctx, todo, workers, func(p part) {
		buf := bufs.Get().([]byte)
		defer bufs.Put(buf)
		n, err := st.ReadRange(ctx, p.obj, p.off, buf[:p.len])
		if err != nil && !errors.Is(err, io.EOF) {
			res.record(p.obj.Key, 0, err)
			return
		}
		c.Put(p.obj, p.off/c.BlockSize(), buf[:n], cache.ForReadAhead)
		bar.Add64(int64(n))
		res.record(p.obj.Key, int64(n), nil)
		if left[p.obj.Key].Add(-1) == 0 {
			makeWhole(p.obj)
		}
	})
	bar.Finish()
	res.elapsed = time.Since(start)
	return res, nil
}

func partCached(c *cache.Cache, o store.Object, off, n, bs int64) bool {
	for idx := off / bs; idx*bs < off+n; idx++ {
		if !c.Lookup(o, idx).Has(cache.InRing) {
			return false
		}
	}
	return true
}

// warmThroughMount reads each shard through a running mount, whose read
// path fills the cache it owns.
func warmThroughMount(ctx context.Context, out io.Writer, mnt string, objs []store.Object, workers, bufSize int) *warmResult {
	res := &warmResult{shards: len(objs), failed: map[string]error{}}
	var total int64
	for _, o := range objs {
		total += o.Size
	}
	start := time.Now()
	bar := startProgress(out, "warm", total)
	bufs := buffers(int64(bufSize))
	forEach(ctx, objs, workers/4, func(o store.Object) {
		buf := bufs.Get().([]byte)
		defer bufs.Put(buf)
		n, err := readWhole(ctx, filepath.Join(mnt, o.Key), buf, bar)
		res.record(o.Key, n, err)
	})
	bar.Finish()
	res.elapsed = time.Since(start)
	return res
}

func readWhole(ctx context.Context, path string, buf []byte, bar *progressbar.ProgressBar) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// Every block read must reach the cache, even where the mount would
	// skip a cache disk slower than the network. A mount that never skips
	// answers ENOTTY, which changes nothing.
	_ = unix.IoctlSetInt(int(f.Fd()), uint(shardfs.CmdFillCache), 0)
	var total int64
	for ctx.Err() == nil {
		n, err := f.Read(buf)
		total += int64(n)
		bar.Add64(int64(n))
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	return total, ctx.Err()
}

func reportWarm(w io.Writer, r *warmResult, interrupted error) error {
	rate := float64(r.fetched) / max(r.elapsed.Seconds(), 1e-3)
	fmt.Fprintf(w, "warmed %d shards: %s fetched, %s already cached, %s, %s/s; %d held as whole files\n",
		r.shards-len(r.failed), formatSize(r.fetched), formatSize(r.skipped), r.elapsed.Round(time.Millisecond), formatSize(int64(rate)), r.whole)
	if interrupted != nil {
		return cli.Exit("interrupted: run warm again to resume", 130)
	}
	if len(r.failed) == 0 {
		return nil
	}
	keys := make([]string, 0, len(r.failed))
	for k := range r.failed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "failed: %s: %v\n", k, r.failed[k])
	}
	return cli.Exit(fmt.Sprintf("%d of %d shards failed to warm", len(r.failed), r.shards), 1)
}
