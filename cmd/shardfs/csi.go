package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/csi"
	shardfs "github.com/shardfs/shardfs/fs"
)

// daemonStopGrace is how long NodeUnpublishVolume waits for a daemon to
// exit after SIGTERM before it kills it: a daemon whose mount was detached
// while a file was open waits up to connectionGrace for the connection.
const daemonStopGrace = 2*connectionGrace + 5*time.Second

func csiCommand() *cli.Command {
	return &cli.Command{
		Name:  "csi",
		Usage: "serve the Kubernetes CSI node plugin (Identity and Node services) on a unix socket",
		Description: "Mounts each published volume with a 'shardfs mount' daemon of its own; the volume context holds the\n" +
			"mount options by their fstab names (source, endpoint_url, cache_size, ...), the volume's secret the\n" +
			"AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN the daemon gets in its environment.",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "endpoint", Value: "unix:///csi/csi.sock", Usage: "the gRPC socket kubelet and node-driver-registrar talk to", EnvVars: env("endpoint")},
			&cli.StringFlag{Name: "node-id", Usage: "this node's name as kubelet knows it (required)", EnvVars: env("node-id")},
			&cli.StringFlag{Name: "cache-root", Value: "/var/lib/shardfs-csi", Usage: "host directory holding one cache dir per source, the volumes' records and daemon logs", EnvVars: env("cache-root")},
			&cli.StringFlag{Name: "cgroup-root", Value: "/sys/fs/cgroup", Usage: "where the host's cgroup hierarchies are mounted: each volume's daemon runs in a group of its own, shardfs-csi/HASH, in each of them, with the plugin's memory limit, so that it outlives the plugin's container; \"\" leaves daemons in the plugin's groups", EnvVars: env("cgroup-root")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: env("log-level")},
		},
		Action: func(c *cli.Context) error {
			if _, err := positional(c); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding own executable: %w", err)
			}
			log := newLogger(c.App.ErrWriter, c.String("log-level"))
			mounter := daemonMounter{exe: exe}
			if root := c.String("cgroup-root"); root != "" {
				if mounter.groups, err = newDaemonGroups(root); err != nil {
					return err
				}
				log.Info("daemons run in cgroups of their own", "parent", daemonCgroupParent, "root", root, "memory_limit", mounter.groups.memoryLimit)
			}
			if os.Getpid() == 1 {
				// The kernel kills every process of a PID namespace
				// when its first one exits.
				log.Warn("the plugin is PID 1 of its PID namespace: its volumes' daemons die with it; run its pod with hostPID")
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return csi.Serve(ctx, c.String("endpoint"), csi.Config{
				NodeID:    c.String("node-id"),
				CacheRoot: c.String("cache-root"),
				Version:   buildVersion(),
				Mounter:   mounter,
				Args:      csiMountArgs,
				Log:       log,
			})
		},
	}
}

// csiMountArgs is the mount command line of a CSI volume: its options go
// through the fstab parser and the mount command's own flag checks, so a
// bad option fails with the line the CLI prints for it, before anything
// is started. Calls take turns (csiParsing): the Node service publishes
// volumes at once, and the CLI library's flags shared by every app (its
// help flag among them) are written by each parse.
func csiMountArgs(source, target string, options []string) ([]string, error) {
	csiParsing.Lock()
	defer csiParsing.Unlock()
	app := newApp()
	mount := findCommand(app.Commands, "mount")
	args := []string{"shardfs", "mount", source, target}
	for _, opt := range options {
		flag, err := optionFlag(opt, mount.Flags)
		if err != nil {
			return nil, err
		}
		if flag != "" {
			args = append(args, flag)
		}
	}
	args = hoistFlags(app, args)
	mount.Action = func(c *cli.Context) error {
		if _, err := positional(c, "SOURCE", "MOUNTPOINT"); err != nil {
			return err
		}
		_, err := mountConfigFrom(c)
		return err
	}
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	if err := app.Run(args); err != nil {
		return nil, err
	}
	return args[1:], nil
}

// csiParsing serializes csiMountArgs.
var csiParsing sync.Mutex

// daemonMounter runs this binary's mount command, which daemonizes, for
// each volume. The daemons outlive the plugin: each runs in a session and,
// with groups, in cgroups of its own, so a restarted plugin finds their
// mounts in the mount table.
type daemonMounter struct {
	exe    string
	groups *daemonGroups // nil: daemons stay in the plugin's cgroups
}

func (m daemonMounter) Mount(ctx context.Context, target string, args, env []string) error {
	if m.groups != nil {
		join, err := m.groups.make(target)
		if err != nil {
			return err
		}
		env = append(env[:len(env):len(env)], join)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(m.exe, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if m.groups != nil {
			// A group that cannot go yet is made again by the next
			// publish of the target; the mount's own line matters more.
			_ = m.groups.remove(target)
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return fmt.Errorf("running %s mount: %w", m.exe, err)
		}
		line := lastLine(stderr.String())
		if line == "" {
			line = fmt.Sprintf("shardfs mount failed (%v)", err)
		}
		return &csi.MountError{Line: strings.TrimPrefix(line, "shardfs: ")}
	}
	return nil
}

// Unmount detaches target lazily, so it never waits for a reader, then
// stops the daemon with SIGTERM (SIGKILL after daemonStopGrace), waits
// until it is gone, which frees the source's cache dir, and removes its
// cgroup.
func (m daemonMounter) Unmount(ctx context.Context, target string) error {
	pid := daemonPID(target)
	if err := lazyUnmount(ctx, target); err != nil {
		return err
	}
	if pid > 0 && syscall.Kill(pid, syscall.SIGTERM) == nil {
		waitExit(pid, daemonStopGrace)
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitExit(pid, daemonStopGrace)
		}
	}
	if m.groups != nil {
		return m.groups.remove(target)
	}
	return nil
}

func (m daemonMounter) Mounts() ([]csi.Mount, error) {
	infos, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("fuse.shardfs"))
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	out := make([]csi.Mount, 0, len(infos))
	for _, i := range infos {
		out = append(out, csi.Mount{Target: i.Mountpoint, Source: i.Source})
	}
	return out, nil
}

// Check opens the mount's statistics file: an open always reaches the
// daemon (a stat may be answered from the kernel's attribute cache), and a
// mount whose daemon is gone answers it with ENOTCONN at once.
func (m daemonMounter) Check(target string) error {
	f, err := os.Open(filepath.Join(target, shardfs.SideDir, "stats"))
	if err != nil {
		return err
	}
	return f.Close()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
