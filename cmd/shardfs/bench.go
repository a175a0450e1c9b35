package main

import (
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/bench"
	"github.com/shardfs/shardfs/prefetch"
)

// benchCommand is the benchmark driver (run: scenarios into results.jsonl;
// report: results into tables and plots) and the workloads it runs, two
// ways: straight against the store (the ceiling without FUSE) and over the
// files of any mounted directory (shardfs, s3fs, rclone mount).
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
		Usage: "run benchmark scenarios, report their results, or run one workload directly or through a mount",
		Description: "run and report are the benchmark driver (docs/BENCHMARKS.md, method). direct and files print one\n" +
			"JSON object per workload. Workloads: seq (read everything once), ttfb (median time to the first\n" +
			"--ttfb-size bytes over --opens opens of distinct objects), random (--random-reads reads of\n" +
			"--random-size at seeded offsets).",
		Subcommands: []*cli.Command{
			benchRunCommand(),
			benchReportCommand(),
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
		&cli.StringFlag{Name: "name", Usage: "label of the output lines (default: direct, or the directory)", EnvVars: env("bench-name")},
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

func readBenchSettings(c *cli.Context) (bench.Settings, error) {
	s := bench.Settings{
		Name: c.String("name"), Readers: c.Int("readers"), Workers: c.Int("readers"),
		Opens: c.Int("opens"), RandomReads: c.Int("random-reads"), Seed: c.Int64("seed"),
	}
	for _, w := range strings.Split(c.String("workload"), ",") {
		switch w = strings.TrimSpace(w); w {
		case "seq", "ttfb", "random":
			s.Workloads = append(s.Workloads, w)
		default:
			return s, fmt.Errorf("--workload: unknown workload %q (want seq, ttfb or random)", w)
		}
	}
	if err := sizeFlags(c, map[string]*int64{"ttfb-size": &s.TTFBSize, "random-size": &s.RandomSize}); err != nil {
		return s, err
	}
	if s.TTFBSize <= 0 || s.RandomSize <= 0 {
		return s, fmt.Errorf("--ttfb-size and --random-size must be positive")
	}
	if s.Readers < 1 || s.Opens < 1 || s.RandomReads < 1 {
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
	if err := sizeFlags(c, map[string]*int64{"part-size": &s.Chunk}); err != nil {
		return err
	}
	s.RangeSize, s.Workers = s.Chunk, c.Int("concurrency")
	if s.Chunk <= 0 || s.Workers < 1 {
		return fmt.Errorf("--part-size and --concurrency must be positive")
	}
	if s.Name == "" {
		s.Name = "direct"
	}
	// The client's connection pool must hold every GET in flight.
	cfg, err := sourceConfigFrom(c, max(s.Workers, s.Readers, prefetch.DefaultConcurrency))
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
	return bench.RunWorkloads(ctx, c.App.Writer, bench.Direct(b.retry, objs), s, func() map[string]float64 {
		return map[string]float64{"gets": float64(b.meter.C.GETs.Load()), "get_bytes": float64(b.meter.C.BytesRead.Load())}
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
	if err := sizeFlags(c, map[string]*int64{"range-size": &s.RangeSize, "read-size": &s.Chunk}); err != nil {
		return err
	}
	if s.Chunk <= 0 {
		return fmt.Errorf("--read-size must be a positive size")
	}
	if s.Name == "" {
		s.Name = args[0]
	}
	t, err := bench.ListFiles(args[0], c.String("include"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return bench.RunWorkloads(ctx, c.App.Writer, t, s, func() map[string]float64 { return nil })
}
