package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/metrics"
)

func statsCommand() *cli.Command {
	return &cli.Command{
		Name:         "stats",
		Usage:        "print what a running mount is doing: bytes per tier, network wait, GETs, retries, cache, read-ahead",
		ArgsUsage:    "MOUNTPOINT",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the raw JSON of MOUNTPOINT/.shardfs/stats", EnvVars: env("json")},
		},
		Action: func(c *cli.Context) error {
			args, err := positional(c, "MOUNTPOINT")
			if err != nil {
				return err
			}
			path := filepath.Join(args[0], shardfs.SideDir, "stats")
			raw, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("%s is not a shardfs mount (reading %s: %v)", args[0], path, err)
			}
			if c.Bool("json") {
				_, err := c.App.Writer.Write(raw)
				return err
			}
			var samples []metrics.Sample
			if err := json.Unmarshal(raw, &samples); err != nil {
				return fmt.Errorf("reading %s: %w", path, err)
			}
			return printStats(c.App.Writer, samples)
		},
	}
}

func printStats(out io.Writer, samples []metrics.Sample) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "METRIC\tLABELS\tVALUE")
	for _, s := range samples {
		name := strings.TrimPrefix(s.Name, "shardfs_")
		fmt.Fprintf(w, "%s\t%s\t%s\n", name, formatLabels(s.Labels), formatValue(s))
	}
	return w.Flush()
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func formatValue(s metrics.Sample) string {
	switch {
	case s.Count > 0:
		return fmt.Sprintf("n=%d mean=%s p50<=%s p99<=%s", s.Count, seconds(s.Value/float64(s.Count)), seconds(s.P50), seconds(s.P99))
	case strings.HasSuffix(s.Name, "_bytes") || strings.HasSuffix(s.Name, "_bytes_total"):
		return formatSize(int64(s.Value))
	case strings.HasSuffix(s.Name, "_seconds_total") || strings.HasSuffix(s.Name, "_seconds"):
		return seconds(s.Value)
	}
	return fmt.Sprintf("%.0f", s.Value)
}

func seconds(v float64) string {
	switch {
	case v >= 1:
		return fmt.Sprintf("%.2fs", v)
	case v >= 1e-3:
		return fmt.Sprintf("%.2fms", v*1e3)
	}
	return fmt.Sprintf("%.0fµs", v*1e6)
}
