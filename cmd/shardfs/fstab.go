package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// mount(8) runs `mount -t fuse.shardfs SOURCE DIR -o OPTS` (and fstab lines
// of that type) through fuse3's mount.fuse helper, which calls
// `shardfs SOURCE DIR -o OPTS`. fstabArgs turns that form into the mount
// command line, so the rest of the program sees one syntax:
//
//	shardfs s3://b/p /mnt -o ro,endpoint_url=http://h:9000,cache_dir=/nvme
//	shardfs mount s3://b/p /mnt --endpoint-url=http://h:9000 --cache-dir=/nvme
//
// Like gcsfuse's helper, options meant for mount(8) or the kernel (rw,
// noauto, _netdev, nofail, x-systemd.*, ...) are dropped; every other
// option must name a mount flag, with dashes or underscores.

// ignoredMountOptions are the generic options mount(8) and mount.fuse pass
// or leave in: none of them changes a read-only FUSE mount of shards.
var ignoredMountOptions = map[string]bool{
	"defaults": true, "rw": true, "ro": true, "auto": true, "noauto": true,
	"user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"_netdev": true, "nofail": true, "dev": true, "nodev": true, "suid": true, "nosuid": true,
	"exec": true, "noexec": true, "async": true, "sync": true, "dirsync": true,
	"atime": true, "noatime": true, "diratime": true, "nodiratime": true,
	"relatime": true, "norelatime": true, "strictatime": true, "nostrictatime": true,
	"lazytime": true, "nolazytime": true, "silent": true, "loud": true,
	"default_permissions": true,
}

// ignoredMountPrefixes are option families that belong to mount(8), systemd
// or util-linux, never to the file system.
var ignoredMountPrefixes = []string{"x-", "comment=", "_"}

// commandLine is os.Args, or its rewrite by fstabArgs when mount(8) called;
// os.Args is rewritten too, because the daemon re-executes it.
func commandLine(app *cli.App) ([]string, error) {
	if !isMountHelperCall(app, os.Args) {
		return os.Args, nil
	}
	args, err := fstabArgs(os.Args, findCommand(app.Commands, "mount").Flags)
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	os.Args = args
	return args, nil
}

// isMountHelperCall tells the mount.fuse form from a command: it has two
// positional words, and the first is no command name and no flag.
func isMountHelperCall(app *cli.App, args []string) bool {
	if len(args) < 3 || strings.HasPrefix(args[1], "-") || findCommand(app.Commands, args[1]) != nil {
		return false
	}
	return !strings.HasPrefix(args[2], "-")
}

// fstabArgs rewrites args (argv, program name first) of the form
// `SOURCE DIR [-o OPTS]...` into `mount SOURCE DIR --flag=value...`, for
// the flags of the mount command. The error names the first option that
// is neither a flag nor a generic mount option.
func fstabArgs(args []string, flags []cli.Flag) ([]string, error) {
	if len(args) < 3 {
		return nil, fmt.Errorf("usage: %s SOURCE MOUNTPOINT [-o OPTIONS]", filepath.Base(args[0]))
	}
	out := []string{args[0], "mount", args[1], args[2]}
	rest := args[3:]
	for len(rest) > 0 {
		var opts string
		switch {
		case rest[0] == "-o" && len(rest) > 1:
			opts, rest = rest[1], rest[2:]
		case strings.HasPrefix(rest[0], "-o") && len(rest[0]) > 2:
			opts, rest = rest[0][2:], rest[1:]
		default:
			return nil, fmt.Errorf("unexpected argument %q after SOURCE MOUNTPOINT (only -o OPTIONS may follow)", rest[0])
		}
		for _, opt := range strings.Split(opts, ",") {
			flag, err := optionFlag(opt, flags)
			if err != nil {
				return nil, err
			}
			if flag != "" {
				out = append(out, flag)
			}
		}
	}
	return out, nil
}

// optionFlag maps one key[=value] option to --key[=value], or to "" for an
// option that is ignored.
func optionFlag(opt string, flags []cli.Flag) (string, error) {
	if opt == "" || ignoredMountOptions[opt] {
		return "", nil
	}
	for _, p := range ignoredMountPrefixes {
		if strings.HasPrefix(opt, p) {
			return "", nil
		}
	}
	key, value, hasValue := strings.Cut(opt, "=")
	name := strings.ReplaceAll(key, "_", "-")
	if name == "foreground" {
		return "", fmt.Errorf("mount option %q would keep mount(8) waiting forever; run 'shardfs mount --foreground' itself", key)
	}
	f := mountFlag(name, flags)
	if f == nil {
		return "", fmt.Errorf("unknown mount option %q (options are the flags of 'shardfs mount --help', e.g. endpoint_url=URL)", key)
	}
	if _, isBool := f.(*cli.BoolFlag); isBool || hasValue {
		if hasValue {
			return "--" + name + "=" + value, nil
		}
		return "--" + name, nil
	}
	return "", fmt.Errorf("mount option %q needs a value (%s=...)", key, key)
}

// mountFlag finds a flag by its long name; one-letter aliases are no options.
func mountFlag(name string, flags []cli.Flag) cli.Flag {
	if len(name) < 2 {
		return nil
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}
