package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

func lsCommand() *cli.Command {
	return listingCommand("ls", "list the shards of SOURCE with their sizes", writeSizes)
}

func manifestCommand() *cli.Command {
	return listingCommand("manifest", "write SOURCE's listing (key, size, etag) as JSON lines, for mount --manifest",
		store.WriteManifest)
}

// listingCommand is a command that lists SOURCE, as a mount would, and
// writes the objects to stdout with write.
func listingCommand(name, usage string, write func(io.Writer, []store.Object) error) *cli.Command {
	return &cli.Command{
		Name:         name,
		Usage:        usage,
		ArgsUsage:    "SOURCE",
		Flags:        s3Flags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			args, err := positional(c, "SOURCE")
			if err != nil {
				return err
			}
			cfg, err := sourceConfigFrom(c, prefetch.DefaultConcurrency)
			if err != nil {
				return err
			}
			b, err := openSource(c.Context, cfg, args[0], newLogger(c.App.ErrWriter, "warn"))
			if err != nil {
				return err
			}
			return write(c.App.Writer, b.objects)
		},
	}
}

// writeSizes writes a line "SIZE<tab>KEY" per object.
func writeSizes(out io.Writer, objs []store.Object) error {
	w := bufio.NewWriter(out)
	for _, o := range objs {
		fmt.Fprintf(w, "%d\t%s\n", o.Size, o.Key)
	}
	return w.Flush()
}
