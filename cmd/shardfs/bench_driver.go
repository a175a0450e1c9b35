package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/bench"
)

// benchRunCommand is `shardfs bench run`: the scenarios of the given files,
// one after another, into OUT/results.jsonl.
func benchRunCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run benchmark scenarios (bench/scenarios/*.yaml) and append one JSON line per measured pass to OUT/results.jsonl",
		ArgsUsage: "SCENARIO.yaml...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "results, logs, mountpoint and cache dirs (default .work/bench/TIME)"},
			&cli.BoolFlag{Name: "smoke", Usage: "apply each scenario's smoke settings: tiny data, one round, seconds per run"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list the runs in order and stop"},
			&cli.StringSliceFlag{Name: "workload", Usage: "run only this workload of each scenario (repeat for more)"},
			&cli.StringSliceFlag{Name: "store", Usage: "run only on this store of each scenario: loopback or remote"},
			&cli.BoolFlag{Name: "profile", Usage: "record a CPU profile of every shardfs daemon, mount to unmount, and its allocation profile at unmount, in OUT/profiles (go tool pprof)"},
			&cli.StringFlag{Name: "root", Value: ".", Usage: "the source tree (scripts/, bench/, .tools/bin)"},
			&cli.StringFlag{Name: "python", Value: "/usr/bin/python3", Usage: "the interpreter with torch (Debian's)"},
			&cli.StringFlag{Name: "lock", Value: "/tmp/shardfs-bench.lock", Usage: "lock held for the whole run"},
		},
		OnUsageError: usageError,
		Action:       runBenchDriver,
	}
}

func runBenchDriver(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("name at least one scenario file (bench/scenarios/*.yaml)")
	}
	var scenarios []*bench.Scenario
	for _, path := range c.Args().Slice() {
		s, err := bench.LoadScenario(path, c.Bool("smoke"))
		if err != nil {
			return err
		}
		if only := c.StringSlice("workload"); len(only) > 0 {
			if err := s.Only(only); err != nil {
				return err
			}
		}
		if only := c.StringSlice("store"); len(only) > 0 {
			if err := s.OnlyStores(only); err != nil {
				return err
			}
		}
		scenarios = append(scenarios, s)
	}
	if c.Bool("dry-run") {
		for _, s := range scenarios {
			for _, r := range s.Expand() {
				fmt.Fprintf(c.App.Writer, "%s\tround %d\t%s\t%s\t%s\tx=%g\n", s.Name, r.Round, r.Store, r.Workload.Name, r.System.Name, r.X)
			}
		}
		return nil
	}
	root, err := filepath.Abs(c.String("root"))
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out := c.String("out")
	if out == "" {
		out = filepath.Join(root, ".work", "bench", time.Now().UTC().Format("20060102T150405Z"))
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return bench.Drive(ctx, bench.Options{Root: root, Out: out, Shardfs: self, Python: c.String("python"),
		Lock: c.String("lock"), Log: c.App.ErrWriter, Profile: c.Bool("profile")}, scenarios)
}

// benchReportCommand is `shardfs bench report`: results into markdown
// tables and PNG plots.
func benchReportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "turn results.jsonl files into markdown tables (medians, ranges, ratios) and PNG plots",
		ArgsUsage: "RESULTS.jsonl...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "doc", Usage: "write the tables into this document, between its generated-section markers (default: print them)"},
			&cli.StringFlag{Name: "plots", Usage: "directory for the PNG plots (none without it)"},
			&cli.StringFlag{Name: "plot-link", Usage: "how the tables link the plots directory (default: its path relative to --doc)"},
			&cli.StringFlag{Name: "root", Value: ".", Usage: "the source tree (bench/plot.py)"},
			&cli.StringFlag{Name: "python", Value: "/usr/bin/python3", Usage: "the interpreter with matplotlib (Debian's)"},
		},
		OnUsageError: usageError,
		Action:       runBenchReport,
	}
}

func runBenchReport(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("name at least one results file (OUT/results.jsonl of shardfs bench run)")
	}
	recs, err := bench.ReadRecords(c.Args().Slice()...)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("the results files hold no records")
	}
	tables := bench.Summarize(recs)
	links := map[string]string{}
	if dir := c.String("plots"); dir != "" {
		link := c.String("plot-link")
		if link == "" && c.String("doc") != "" {
			if link, err = filepath.Rel(filepath.Dir(c.String("doc")), dir); err != nil {
				return err
			}
		}
		if link == "" {
			link = dir
		}
		plots := bench.Plots(tables)
		if err := drawPlots(c, dir, plots); err != nil {
			return err
		}
		for _, p := range plots {
			links[p.Key] = filepath.ToSlash(filepath.Join(link, p.File))
		}
	}
	md := bench.Markdown(tables, links)
	doc := c.String("doc")
	if doc == "" {
		_, err := fmt.Fprint(c.App.Writer, md)
		return err
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	updated, err := bench.Splice(string(old), md)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(updated), 0o644)
}

// drawPlots hands the plots to bench/plot.py (matplotlib) as JSON.
func drawPlots(c *cli.Context, dir string, plots []bench.Plot) error {
	if len(plots) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	spec, err := json.Marshal(plots)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.String("python"), filepath.Join(c.String("root"), "bench", "plot.py"), dir)
	cmd.Stdin = bytes.NewReader(spec)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench/plot.py: %v\n%s", err, out)
	}
	return nil
}
