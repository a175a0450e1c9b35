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
// print: "shardfs VERSION (REVISION[, modified]) GO". The benchmark driver
// reads the revision of every binary it measures from this line
// (bench.ParseVersion), so its shape is kept.
func printVersion(c *cli.Context) {
	fmt.Fprintln(c.App.Writer, "shardfs", buildVersion())
}

// buildVersion is the module version, the VCS revision the binary was
// built from and whether that tree had uncommitted changes, and the Go
// version. A binary the go command did not stamp (-buildvcs=false, or a
// build in a git worktree, which the go command does not recognise as a
// repository) has no revision to print.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return describeBuild(info)
}

func describeBuild(info *debug.BuildInfo) string {
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	v := info.Main.Version
	if len(rev) >= 12 {
		v += " (" + rev[:12]
		if modified == "true" {
			v += ", modified"
		}
		v += ")"
	}
	return v + " " + info.GoVersion
}
