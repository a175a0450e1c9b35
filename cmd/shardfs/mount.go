package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/urfave/cli/v2"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/listing"
)

func mountCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.BoolFlag{Name: "foreground", Aliases: []string{"f"}, Usage: "stay attached; Ctrl-C or SIGTERM unmounts", EnvVars: env("foreground")},
		&cli.StringFlag{Name: "log-file", Usage: "daemon log (default: ~/.cache/shardfs/logs/MOUNTPOINT.log); foreground logs to stderr", EnvVars: env("log-file")},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: env("log-level")},
		&cli.BoolFlag{Name: "allow-other", Usage: "let other users read the mount (needs user_allow_other in /etc/fuse.conf)", EnvVars: env("allow-other")},
		&cli.IntFlag{Name: "uid", Value: defaultUID, Usage: "owner of every file", EnvVars: env("uid")},
		&cli.IntFlag{Name: "gid", Value: defaultGID, Usage: "group of every file", EnvVars: env("gid")},
		&cli.IntFlag{Name: "read-ahead-kb", Value: shardfs.DefaultKernelOptions().ReadAheadKB, Usage: "kernel read-ahead of the mount in KiB (0: kernel default)", EnvVars: env("read-ahead-kb"), Category: "Kernel"},
		&cli.StringFlag{Name: "passthrough", Value: shardfs.PassthroughAuto.String(), Usage: "auto: opens of shards the cache holds as whole files are passed to the kernel, which reads the files itself (FUSE passthrough: root, Linux 6.9+, a cache dir on a local filesystem; refused, the mount says so once and serves them itself); off: the daemon serves every read", EnvVars: env("passthrough"), Category: "Kernel"},
		&cli.StringFlag{Name: "page-cache", Value: autoPageCache, Usage: "keep: the kernel keeps shard pages across opens; direct: every read is answered by the daemon straight into the reader's buffer, no page cache; auto: direct when the data set is larger than RAM (its pages would be evicted before the next epoch) or when shards read whole are passed through from their whole-shard files on later opens (--cache-dir; the mount's own pages would hold them twice), else keep", EnvVars: env("page-cache"), Category: "Kernel"},
		&cli.StringFlag{Name: "memory-cache-shared", Value: string(sharedRAMAuto), Usage: "on: the RAM tier lives in a file in " + sharedRAMDir + " that GPU clients of the daemon's user map, so the GPU copies its blocks straight out of it (reserved whole at mount); off: on the daemon's heap; auto: on when the daemon sees an NVIDIA GPU (off, with a warning, when " + sharedRAMDir + " is too small)", EnvVars: env("memory-cache-shared"), Category: "Cache"},
		&cli.IntFlag{Name: "max-background", Value: shardfs.DefaultKernelOptions().MaxBackground, Usage: "FUSE requests the kernel keeps in flight", EnvVars: env("max-background"), Category: "Kernel"},
		&cli.StringFlag{Name: "manifest", Usage: "take the listing from this file (shardfs manifest SOURCE > FILE) instead of listing the bucket", EnvVars: env("manifest")},
		&cli.DurationFlag{Name: "metadata-ttl", Value: listing.DefaultConfig().TTL, Usage: "how long a listing stands: with --cache-dir a remount within it sends no LIST, and the mount lists again in the background this often (new keys appear, removed ones go, changed ones are served to new opens); 0 is forever", EnvVars: env("metadata-ttl")},
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464)", EnvVars: env("metrics-addr")},
		&cli.BoolFlag{Name: "debug-fuse", Usage: "log every FUSE request", EnvVars: env("debug-fuse")},
	}
	flags = append(flags, s3Flags()...)
	flags = append(flags, cacheFlags()...)
	flags = append(flags, prefetchFlags()...)
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount SOURCE read-only at MOUNTPOINT",
		ArgsUsage: "SOURCE MOUNTPOINT",
		Description: "Lists SOURCE (or reads the listing persisted in --cache-dir), mounts it and returns when the mount is ready\n" +
			"(the daemon keeps running).\n" +
			"On any failure it exits non-zero with one line naming the cause and leaves nothing mounted.",
		Flags:        flags,
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			args, err := positional(c, "SOURCE", "MOUNTPOINT")
			if err != nil {
				return err
			}
			cfg, err := mountConfigFrom(c)
			if err != nil {
				return err
			}
			if !c.Bool("foreground") {
				logPath := c.String("log-file")
				if logPath == "" {
					abs, _ := filepath.Abs(args[1])
					logPath = defaultLogPath(abs)
				}
				return daemonize(os.Args[1:], logPath, c.App.ErrWriter)
			}
			ready := newReadyReporter()
			err = runMount(c.Context, c.App.ErrWriter, cfg, args[0], args[1], ready)
			if err != nil {
				ready.failed(err)
			}
			return err
		},
	}
}

// runMount mounts and serves until a signal or an external unmount.
func runMount(parent context.Context, logOut io.Writer, cfg mountConfig, source, dir string, ready *readyReporter) error {
	if p := cfg.LogFile; p != "" && ready == nil {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("log file: %w", err)
		}
		defer f.Close()
		logOut = f
	}
	log := newLogger(logOut, cfg.LogLevel)
	if ready != nil {
		log = slog.New(terminalWarnings{log.Handler(), ready})
	}

	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopProfiles, err := startProfiles(log)
	if err != nil {
		return err
	}
	defer stopProfiles()

	mountpoint, err := checkMountpoint(dir)
	if err != nil {
		return err
	}
	m, err := newMountWiring(ctx, cfg, source, mountpoint, log)
	if err != nil {
		return err
	}
	defer m.Close()

	var server *fuse.Server
	stderr, err := captureStderr(func() (err error) {
		server, err = shardfs.Mount(mountpoint, m.root, m.kernel)
		return err
	})
	if err != nil {
		if reason := fusermountReason(stderr); reason != "" {
			return fmt.Errorf("mounting %s: %s", mountpoint, reason)
		}
		return fmt.Errorf("mounting %s: %w", mountpoint, err)
	}
	dev, err := checkAnswers(mountpoint)
	if err != nil {
		unmountServer(server, mountpoint, log)
		server.Wait()
		return err
	}
	shardfs.Answering(server, m.root, m.kernel, dev)
	log.Info("mounted", "source", m.backend.src.String(), "mountpoint", mountpoint, "objects", len(m.backend.objects))
	ready.ready()
	notifySystemd(daemon.SdNotifyReady, log)

	done := make(chan struct{})
	go func() {
		server.Wait()
		close(done)
	}()
	select {
	case <-done:
		log.Info("unmounted", "mountpoint", mountpoint)
		notifySystemd(daemon.SdNotifyStopping, log)
		return nil
	case <-ctx.Done():
	}
	log.Info("signal received, unmounting", "mountpoint", mountpoint)
	notifySystemd(daemon.SdNotifyStopping, log)
	how := unmountServer(server, mountpoint, log)
	if how == stillServed {
		// unmountServer has waited connectionGrace for the serve loops.
		log.Warn(keptConnection, "mountpoint", mountpoint)
		return nil
	}
	select {
	case <-done:
	case <-time.After(connectionGrace):
		if how == detached {
			log.Warn(keptOpenFiles, "mountpoint", mountpoint)
		} else {
			log.Warn(keptConnection, "mountpoint", mountpoint)
		}
	}
	return nil
}

// After an unmount the kernel closes the connection once nothing else holds
// the mount. A copy of it in another mount namespace (a container, or an
// `ip netns exec`, started while it was mounted) keeps it open, and the
// serve loops would wait on it for ever: the daemon exits after
// connectionGrace instead, which closes the connection, and the copy
// answers ENOTCONN.
//
// A mount detached lazily because files were open on it stays connected
// the same way until they are closed; the daemon then also exits after
// connectionGrace, and those files answer ENOTCONN.
const (
	connectionGrace = 5 * time.Second
	keptConnection  = "unmounted here, but another mount namespace still holds the mount; exiting, which disconnects it there"
	keptOpenFiles   = "detached while files were open on the mount, which still hold it; exiting, which disconnects them"
)

// unmountResult is how unmountServer left the mount.
type unmountResult int

const (
	unmounted   unmountResult = iota // the kernel let go and the serve loops ended
	stillServed                      // unmounted, but the serve loops ran on for connectionGrace
	detached                         // busy: detached lazily, files open on it keep it connected
)

// unmountServer asks the kernel to let go; a busy mount (a reader still
// holds a file) is detached lazily so the daemon can still exit cleanly.
func unmountServer(server *fuse.Server, dir string, log *slog.Logger) unmountResult {
	for attempt := 0; attempt < 3; attempt++ {
		// Unmount also waits for the serve loops, which never end while
		// another mount namespace holds the mount (see connectionGrace).
		result := make(chan error, 1)
		go func() { result <- server.Unmount() }()
		var err error
		select {
		case err = <-result:
		case <-time.After(connectionGrace):
			return stillServed
		}
		if err == nil {
			return unmounted
		}
		log.Warn("unmount failed, retrying", "mountpoint", dir, "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	if err := lazyUnmount(context.Background(), dir); err != nil {
		log.Error("lazy unmount failed", "mountpoint", dir, "err", err)
	}
	return detached
}
