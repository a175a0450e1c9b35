package main

import (
	"bufio"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/prefetch"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:         "ls",
		Usage:        "list the shards of SOURCE with their sizes",
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
			log := newLogger(c.App.ErrWriter, "warn")
			b, err := openSource(c.Context, cfg, args[0], log)
			if err != nil {
				return err
			}
			w := bufio.NewWriter(c.App.Writer)
			for _, o := range b.objects {
				fmt.Fprintf(w, "%d\t%s\n", o.Size, o.Key)
			}
			return w.Flush()
		},
	}
}
