package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// hoistFlags moves a command's flags in front of its positional arguments.
// urfave/cli v2 stops parsing flags at the first positional, but users type
// `shardfs mount SRC MNT --cache-dir X`. Everything after "--" stays put.
func hoistFlags(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	// Find the (sub)command path: leading words that name commands.
	cmds := app.Commands
	i := 1
	var flags []cli.Flag = app.Flags
	for i < len(args) {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		flags = c.Flags
		cmds = c.Subcommands
		i++
	}
	takesValue := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, name := range f.Names() {
			takesValue[name] = !isBool
		}
	}
	var front, positional []string
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			positional = append(positional, rest[j:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		front = append(front, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] && j+1 < len(rest) {
			front = append(front, rest[j+1])
			j++
		}
	}
	out := append([]string{}, args[:i]...)
	out = append(out, front...)
	return append(out, positional...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
