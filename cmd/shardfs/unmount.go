package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/metrics"
)

func unmountCommand() *cli.Command {
	return &cli.Command{
		Name:         "unmount",
		Aliases:      []string{"umount"},
		Usage:        "unmount a shardfs mount; its daemon exits",
		ArgsUsage:    "MOUNTPOINT",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "lazy", Aliases: []string{"z"}, Usage: "detach now even if files are open", EnvVars: env("lazy")},
		},
		Action: func(c *cli.Context) error {
			args, err := positional(c, "MOUNTPOINT")
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			mounted, err := isMounted(dir)
			if err != nil {
				return err
			}
			if !mounted {
				return fmt.Errorf("%s is not mounted", dir)
			}
			pid := daemonPID(dir)
			if c.Bool("lazy") {
				err = lazyUnmount(c.Context, dir)
			} else {
				err = fusermount(c.Context, "-u", dir)
			}
			if err != nil {
				return err
			}
			// Return once the daemon is gone, so its cache dir is free
			// and a remount can start at once.
			waitExit(pid, 10*time.Second)
			return nil
		},
	}
}

func lazyUnmount(ctx context.Context, dir string) error {
	if err := fusermount(ctx, "-u", "-z", dir); err == nil {
		return nil
	}
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// fusermount runs fusermount3 (or fusermount), returning its own words on
// failure ("Device or resource busy"). Root, which mounts without it, also
// unmounts without it where neither is installed.
func fusermount(ctx context.Context, args ...string) error {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			if os.Geteuid() == 0 {
				return unmountSyscall(args)
			}
			return fmt.Errorf("fusermount3 not found: install fuse3")
		}
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("unmount %s: %s", args[len(args)-1], msg)
	}
	return nil
}

// daemonPID asks a mount for its daemon's pid; 0 when it cannot tell.
func daemonPID(dir string) int {
	raw, err := os.ReadFile(filepath.Join(dir, shardfs.SideDir, "stats"))
	if err != nil {
		return 0
	}
	var samples []metrics.Sample
	if json.Unmarshal(raw, &samples) != nil {
		return 0
	}
	for _, s := range samples {
		if s.Name == "shardfs_daemon_pid" {
			return int(s.Value)
		}
	}
	return 0
}

func waitExit(pid int, limit time.Duration) {
	if pid <= 0 {
		return
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// unmountSyscall does what fusermount's -u [-z] DIR does, for root.
func unmountSyscall(args []string) error {
	dir, flags := args[len(args)-1], 0
	if slices.Contains(args, "-z") {
		flags = syscall.MNT_DETACH
	}
	if err := syscall.Unmount(dir, flags); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}
