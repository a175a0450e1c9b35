package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:         "version",
		Usage:        "print the version and build",
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			printVersion(c)
			return nil
		},
	}
}

// printVersion is what both `shardfs version` and `shardfs --version`
// print: "shardfs VERSION GO".
func printVersion(c *cli.Context) {
	fmt.Fprintln(c.App.Writer, "shardfs", buildVersion())
}

// buildVersion is the module version, or the VCS revision of a local build.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v + " " + info.GoVersion
}
