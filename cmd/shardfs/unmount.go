package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
				if errors.Is(err, errNoFusermount) && os.Geteuid() == 0 {
					// Root, which mounts without it, unmounts without it.
					err = unmountSyscall(dir, 0)
				}
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
	return unmountSyscall(dir, syscall.MNT_DETACH)
}

// errNoFusermount: neither fusermount3 nor fusermount is installed.
var errNoFusermount = errors.New("fusermount3 not found: install fuse3")

// unmountSyscall unmounts dir with umount(2), flags as it takes them.
func unmountSyscall(dir string, flags int) error {
	if err := syscall.Unmount(dir, flags); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// fusermount runs fusermount3 (or fusermount), returning its own words on
// failure ("Device or resource busy"), errNoFusermount where neither is
// installed.
func fusermount(ctx context.Context, args ...string) error {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return errNoFusermount
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
