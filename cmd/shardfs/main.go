// Command shardfs mounts object-store shards (S3, MinIO, Ceph RGW, or a
// local directory) as a read-only directory and keeps training loaders fed.
//
// This package owns the command line: flags (before or after positional
// arguments, each with a SHARDFS_* environment variable), the daemon
// lifecycle, and the wiring of store, cache, prefetch, gds and fs. It holds
// no read-path logic of its own.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

func main() {
	answerCheck() // a child of checkAnswers exits here
	cli.VersionPrinter = printVersion
	app := newApp()
	args, err := commandLine(app)
	if err == nil {
		err = app.Run(hoistFlags(app, args))
	}
	if err != nil {
		// One line, naming the problem: scripts and people read the same.
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintln(os.Stderr, "shardfs: "+msg)
		code := 1
		if ec, ok := err.(cli.ExitCoder); ok && ec.ExitCode() != 0 {
			code = ec.ExitCode()
		}
		os.Exit(code)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "shardfs",
		Version: buildVersion(), // --version, -v: as mount-s3 and gcsfuse answer it
		Usage:   "mount object-store shards as a fast read-only directory for training loaders",
		Description: "SOURCE is s3://bucket[/prefix] (AWS S3, MinIO, Ceph RGW, anything that speaks S3) or a local/NFS directory.\n" +
			"Flags may come before or after the positional arguments; every flag can also be set with the\n" +
			"SHARDFS_* environment variable shown in its help. AWS credentials come from the standard chain.",
		Commands: []*cli.Command{
			mountCommand(),
			unmountCommand(),
			lsCommand(),
			manifestCommand(),
			statsCommand(),
			cacheCommand(),
			warmCommand(),
			indexCommand(),
			gpusCommand(),
			benchCommand(),
			versionCommand(),
			csiCommand(),
		},
		HideHelpCommand: true,
		OnUsageError:    usageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // main prints the one line
	}
}

// usageError keeps usage mistakes to one line instead of a help page, and
// names the help that explains them: the program's for a mistake before
// any command, else the command's, with the commands above it ("shardfs
// cache verify --help"). The program itself is the root of the lineage.
func usageError(c *cli.Context, err error, _ bool) error {
	help := []string{"--help"}
	for _, l := range c.Lineage() {
		if l.Command == nil || l.Command.Name == "" || l.Command.Name == c.App.Name {
			continue
		}
		help = append([]string{l.Command.Name}, help...)
	}
	return cli.Exit(fmt.Sprintf("%v (see 'shardfs %s')", err, strings.Join(help, " ")), 2)
}

// positional checks the count of positional arguments.
func positional(c *cli.Context, names ...string) ([]string, error) {
	if c.NArg() != len(names) {
		return nil, cli.Exit(fmt.Sprintf("usage: shardfs %s %s (got %d argument(s); see --help)", c.Command.Name, strings.Join(names, " "), c.NArg()), 2)
	}
	return c.Args().Slice(), nil
}
