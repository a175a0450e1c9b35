package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/listing"
	"github.com/shardfs/shardfs/tarindex"
)

func cacheCommand() *cli.Command {
	dirFlag := func() []cli.Flag {
		return []cli.Flag{&cli.StringFlag{Name: "cache-dir", Required: true, Usage: "the cache directory", EnvVars: env("cache-dir")}}
	}
	return &cli.Command{
		Name:         "cache",
		Usage:        "inspect, verify or clear a cache directory",
		OnUsageError: usageError,
		Subcommands: []*cli.Command{
			{
				Name: "stats", Usage: "occupancy of the ring (works while a mount owns it)", Flags: dirFlag(), OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					st, err := cache.InspectDir(c.String("cache-dir"))
					if err != nil {
						return err
					}
					w := tabwriter.NewWriter(c.App.Writer, 2, 4, 2, ' ', 0)
					fmt.Fprintf(w, "dir\t%s\n", st.Dir)
					fmt.Fprintf(w, "ring file\t%s (%s)\n", st.RingFile, formatSize(st.FileBytes))
					fmt.Fprintf(w, "block size\t%s\n", formatSize(st.BlockSize))
					fmt.Fprintf(w, "slots used\t%d of %d\n", st.UsedSlots, st.Slots)
					fmt.Fprintf(w, "bytes cached\t%s\n", formatSize(st.UsedBytes))
					fmt.Fprintf(w, "object versions\t%d\n", st.Versions)
					fmt.Fprintf(w, "whole-shard files\t%d (%s)\n", st.WholeFiles, formatSize(st.WholeBytes))
					if st.OwnerPID != 0 {
						fmt.Fprintf(w, "owner\tpid %d (a running mount)\n", st.OwnerPID)
					}
					return w.Flush()
				},
			},
			{
				Name: "verify", Usage: "check the CRC32C of every slot and whole-shard file, deleting bad whole files; exit 1 when any is bad", Flags: dirFlag(), OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					rep, err := cache.VerifyDir(c.String("cache-dir"))
					if err != nil {
						return cacheDirError(c.String("cache-dir"), err)
					}
					for _, b := range rep.Bad {
						fmt.Fprintf(c.App.Writer, "bad slot %d: key %q block %d: %s\n", b.Slot, b.Key, b.Index, b.Reason)
					}
					for _, b := range rep.BadWhole {
						fmt.Fprintf(c.App.Writer, "bad whole-shard file %s: key %q: %s: deleted\n", b.File, b.Key, b.Reason)
					}
					fmt.Fprintf(c.App.Writer, "%d slots, %d checked, %d good, %d bad\n", rep.Slots, rep.Checked, rep.Good, len(rep.Bad))
					fmt.Fprintf(c.App.Writer, "%d whole-shard files checked, %d good, %d bad\n", rep.WholeChecked, rep.WholeGood, len(rep.BadWhole))
					if len(rep.Bad)+len(rep.BadWhole) > 0 {
						return cli.Exit(verifyFailure(len(rep.Bad), len(rep.BadWhole)), 1)
					}
					return nil
				},
			},
			{
				Name: "clear", Usage: "delete every cached block, whole shard, listing and member index", Flags: dirFlag(), OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if err := cache.ClearDir(c.String("cache-dir"), listing.Subdir, tarindex.Subdir); err != nil {
						return cacheDirError(c.String("cache-dir"), err)
					}
					fmt.Fprintf(c.App.Writer, "cleared %s\n", c.String("cache-dir"))
					return nil
				},
			},
		},
	}
}

// verifyFailure is cache verify's closing line when it found bad slots
// or files: only what verify did, not what any mount served. Bad slots
// stay in the ring (a mount's read checks each block and drops a bad
// one); bad whole-shard files were deleted.
func verifyFailure(badSlots, badWhole int) string {
	count := func(n int, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	var parts []string
	if badSlots > 0 {
		parts = append(parts, count(badSlots, "bad slot"))
	}
	if badWhole > 0 {
		parts = append(parts, count(badWhole, "bad whole-shard file")+" dropped")
	}
	return strings.Join(parts, ", ")
}

func cacheDirError(dir string, err error) error {
	if errors.Is(err, cache.ErrLocked) {
		return fmt.Errorf("cache dir %s is in use by a running mount: %w", dir, err)
	}
	return err
}
