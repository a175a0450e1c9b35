package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// benchCommand measures read workloads two ways with the same code: straight
// against the store (the ceiling without FUSE) and over the files of any
// mounted directory (shardfs, s3fs, rclone mount), so the figures compare
// like with like. scripts/bench.sh runs both side by side.
func benchCommand() *cli.Command {
	direct := append(benchFlags(), s3Flags()...)
	direct = append(direct,
		&cli.StringFlag{Name: "part-size", Value: formatSize(prefetch.DefaultPartSize), Usage: "size of each ranged GET of the sequential workload", EnvVars: env("part-size")},
		&cli.IntFlag{Name: "concurrency", Value: 16, Usage: "parallel ranged GETs of the sequential workload", EnvVars: env("bench-concurrency")},
	)
	files := append(benchFlags(),
		&cli.StringFlag{Name: "read-size", Value: "1MiB", Usage: "size of each read(2) of the sequential workload", EnvVars: env("bench-read-size")},
		&cli.StringFlag{Name: "range-size", Value: "0", Usage: "sequential workload: cut each file into ranges of this size, each read by one reader (0: whole files)", EnvVars: env("bench-range-size")},
	)
	return &cli.Command{
		Name:  "bench",
		Usage: "measure cold sequential throughput, time to first byte and random reads, directly or through a mount",
		Description: "Prints one 'RESULT name=... workload=... key=value ...' line per workload for scripts to parse.\n" +
			"Workloads: seq (read everything once), ttfb (median time to the first --ttfb-size bytes over --opens\n" +
			"opens of distinct objects), random (--random-reads reads of --random-size at seeded offsets).",
		Subcommands: []*cli.Command{
			{
				Name:         "direct",
				Usage:        "ranged GETs against SOURCE without FUSE: the ceiling a mount can reach",
				ArgsUsage:    "SOURCE",
				Flags:        direct,
				OnUsageError: usageError,
				Action:       runBenchDirect,
			},
			{
				Name:         "files",
				Usage:        "the same workloads over the files under DIR (any mount: shardfs, s3fs, rclone)",
				ArgsUsage:    "DIR",
				Flags:        files,
				OnUsageError: usageError,
				Action:       runBenchFiles,
			},
		},
		HideHelpCommand: true,
	}
}

func benchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "label of the RESULT lines (default: direct, or the directory)", EnvVars: env("bench-name")},
		&cli.StringFlag{Name: "workload", Value: "seq,ttfb,random", Usage: "comma-separated workloads to run: seq, ttfb, random", EnvVars: env("bench-workload")},
		&cli.StringFlag{Name: "include", Usage: "only keys (paths relative to DIR) matching this glob", EnvVars: env("include")},
		&cli.IntFlag{Name: "readers", Value: 4, Usage: "parallel readers of the random workload, and of the sequential one over files", EnvVars: env("bench-readers")},
		&cli.IntFlag{Name: "opens", Value: 20, Usage: "opens timed by the ttfb workload, over distinct objects in listing order", EnvVars: env("bench-opens")},
		&cli.StringFlag{Name: "ttfb-size", Value: "4KiB", Usage: "bytes the ttfb workload reads after each open", EnvVars: env("bench-ttfb-size")},
		&cli.StringFlag{Name: "random-size", Value: "1MiB", Usage: "size of each read of the random workload", EnvVars: env("bench-random-size")},
		&cli.IntFlag{Name: "random-reads", Value: 200, Usage: "reads of the random workload", EnvVars: env("bench-random-reads")},
		&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed of the random offsets (the same seed reads the same ranges everywhere)", EnvVars: env("bench-seed")},
	}
}

// benchSettings are the workload parameters shared by both subcommands.
type benchSettings struct {
	name        string
	workloads   []string
	chunk       int64 // one read of the sequential workload
	rangeSize   int64 // sequential job size; 0: whole objects
	workers     int   // parallel sequential jobs
	readers     int
	opens       int
	ttfbSize    int64
	randomSize  int64
	randomReads int
	seed        int64
}

func readBenchSettings(c *cli.Context) (benchSettings, error) {
	s := benchSettings{
		name: c.String("name"), readers: c.Int("readers"), workers: c.Int("readers"),
		opens: c.Int("opens"), randomReads: c.Int("random-reads"), seed: c.Int64("seed"),
	}
	for _, w := range strings.Split(c.String("workload"), ",") {
		switch w = strings.TrimSpace(w); w {
		case "seq", "ttfb", "random":
			s.workloads = append(s.workloads, w)
		default:
			return s, fmt.Errorf("--workload: unknown workload %q (want seq, ttfb or random)", w)
		}
	}
	if err := sizeFlags(c, map[string]*int64{"ttfb-size": &s.ttfbSize, "random-size": &s.randomSize}); err != nil {
		return s, err
	}
	if s.ttfbSize <= 0 || s.randomSize <= 0 {
		return s, fmt.Errorf("--ttfb-size and --random-size must be positive")
	}
	if s.readers < 1 || s.opens < 1 || s.randomReads < 1 {
		return s, fmt.Errorf("--readers, --opens and --random-reads must be at least 1")
	}
	return s, nil
}

func runBenchDirect(c *cli.Context) error {
	args, err := positional(c, "SOURCE")
	if err != nil {
		return err
	}
	s, err := readBenchSettings(c)
	if err != nil {
		return err
	}
	if err := sizeFlags(c, map[string]*int64{"part-size": &s.chunk}); err != nil {
		return err
	}
	s.rangeSize, s.workers = s.chunk, c.Int("concurrency")
	if s.chunk <= 0 || s.workers < 1 {
		return fmt.Errorf("--part-size and --concurrency must be positive")
	}
	if s.name == "" {
		s.name = "direct"
	}
	// The client's connection pool must hold every GET in flight.
	cfg, err := sourceConfigFrom(c, max(s.workers, s.readers, prefetch.DefaultConcurrency))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b, err := openSource(ctx, cfg, args[0], newLogger(c.App.ErrWriter, "warn"))
	if err != nil {
		return err
	}
	objs, err := selectShards(b.objects, c.String("include"), 0, 1)
	if err != nil {
		return err
	}
	t := &directTarget{st: b.retry, objs: objs}
	return runBench(ctx, c.App.Writer, t, s, func() string {
		return fmt.Sprintf("gets=%d get_bytes=%d", b.meter.C.GETs.Load(), b.meter.C.BytesRead.Load())
	})
}

func runBenchFiles(c *cli.Context) error {
	args, err := positional(c, "DIR")
	if err != nil {
		return err
	}
	s, err := readBenchSettings(c)
	if err != nil {
		return err
	}
	if err := sizeFlags(c, map[string]*int64{"range-size": &s.rangeSize, "read-size": &s.chunk}); err != nil {
		return err
	}
	if s.chunk <= 0 {
		return fmt.Errorf("--read-size must be a positive size")
	}
	if s.name == "" {
		s.name = args[0]
	}
	t, err := listFiles(args[0], c.String("include"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runBench(ctx, c.App.Writer, t, s, func() string { return "" })
}

// runBench runs the chosen workloads in order and prints a RESULT line for
// each; extra adds the target's own counters to every line.
func runBench(ctx context.Context, w io.Writer, t benchTarget, s benchSettings, extra func() string) error {
	items := t.items()
	if len(items) == 0 {
		return fmt.Errorf("nothing to read: no objects matched")
	}
	for _, wl := range s.workloads {
		var fields string
		switch wl {
		case "seq":
			r, err := benchSequential(ctx, t, items, s)
			if err != nil {
				return fmt.Errorf("seq: %w", err)
			}
			fields = fmt.Sprintf("bytes=%d seconds=%.3f mbps=%.1f", r.bytes, r.seconds, float64(r.bytes)/r.seconds/1e6)
		case "ttfb":
			r, err := benchFirstByte(ctx, t, items, s)
			if err != nil {
				return fmt.Errorf("ttfb: %w", err)
			}
			fields = fmt.Sprintf("opens=%d bytes=%d ttfb_ms=%.2f min_ms=%.2f max_ms=%.2f", r.opens, s.ttfbSize, r.median, r.min, r.max)
		case "random":
			r, err := benchRandom(ctx, t, items, s)
			if err != nil {
				return fmt.Errorf("random: %w", err)
			}
			fields = fmt.Sprintf("reads=%d size=%d seconds=%.3f reads_per_s=%.1f mbps=%.1f", r.reads, s.randomSize, r.seconds, float64(r.reads)/r.seconds, float64(r.bytes)/r.seconds/1e6)
		}
		if e := extra(); e != "" {
			fields += " " + e
		}
		fmt.Fprintf(w, "RESULT name=%s workload=%s %s\n", s.name, wl, fields)
	}
	return nil
}

// benchItem is one object or file to read.
type benchItem struct {
	key  string
	size int64
}

// benchTarget is what the workloads read from.
type benchTarget interface {
	items() []benchItem
	// open starts reading one item, as a reader starting a shard does.
	open(ctx context.Context, it benchItem) (benchReader, error)
}

// benchReader reads one opened item.
type benchReader interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	Close() error
}

// directTarget reads objects with ranged GETs; "opening" costs nothing, so
// time to first byte is the time of the first GET.
type directTarget struct {
	st   store.Store
	objs []store.Object
}

func (t *directTarget) items() []benchItem {
	out := make([]benchItem, len(t.objs))
	for i, o := range t.objs {
		out[i] = benchItem{key: o.Key, size: o.Size}
	}
	return out
}

func (t *directTarget) open(_ context.Context, it benchItem) (benchReader, error) {
	i := sort.Search(len(t.objs), func(i int) bool { return t.objs[i].Key >= it.key })
	if i == len(t.objs) || t.objs[i].Key != it.key {
		return nil, fmt.Errorf("%s: %w", it.key, store.ErrNotFound)
	}
	return objectReader{st: t.st, obj: t.objs[i]}, nil
}

type objectReader struct {
	st  store.Store
	obj store.Object
}

func (r objectReader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return r.st.ReadRange(ctx, r.obj, off, p)
}

func (r objectReader) Close() error { return nil }

// fileTarget reads regular files under a directory with open(2) and pread(2).
type fileTarget struct {
	dir   string
	files []benchItem
}

// listFiles walks dir for regular files whose relative path matches include.
// Walking is done before any timing, so a mount's listing cost stays out of
// the figures.
func listFiles(dir, include string) (*fileTarget, error) {
	t := &fileTarget{dir: dir}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != dir {
				return filepath.SkipDir // /.shardfs and the like
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if include != "" {
			ok, err := path.Match(include, filepath.ToSlash(rel))
			if err != nil {
				return fmt.Errorf("--include %q: %w", include, err)
			}
			if !ok {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		t.files = append(t.files, benchItem{key: filepath.ToSlash(rel), size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Slice(t.files, func(i, j int) bool { return t.files[i].key < t.files[j].key })
	return t, nil
}

func (t *fileTarget) items() []benchItem { return t.files }

func (t *fileTarget) open(_ context.Context, it benchItem) (benchReader, error) {
	f, err := os.Open(filepath.Join(t.dir, filepath.FromSlash(it.key)))
	if err != nil {
		return nil, err
	}
	return fileReader{f}, nil
}

type fileReader struct{ f *os.File }

func (r fileReader) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}

func (r fileReader) Close() error { return r.f.Close() }
