package main

import (
	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/prefetch"

	"github.com/shardfs/shardfs/store"
)

func manifestCommand() *cli.Command {
	return &cli.Command{
		Name:         "manifest",
		Usage:        "write SOURCE's listing (key, size, etag) as JSON lines, for mount --manifest",
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
			return store.WriteManifest(c.App.Writer, b.objects)
		},
	}
}
