package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/coreos/go-systemd/v22/daemon"

	shardfs "github.com/shardfs/shardfs/fs"
)

// A mount run by systemd (Type=notify, see deploy/shardfs@.service) says
// READY=1 on $NOTIFY_SOCKET once it serves, and STOPPING=1 when a signal
// starts the unmount. Without NOTIFY_SOCKET both are no-ops.

// checkAnswers looks up the mount's control file through the kernel: the
// mount is serving only when a lookup and a getattr come back from this
// daemon. Readiness (the daemonize pipe, systemd) is reported after it.
func checkAnswers(mountpoint string) error {
	ctl := filepath.Join(mountpoint, shardfs.SideDir, "ctl")
	if _, err := os.Stat(ctl); err != nil {
		return fmt.Errorf("the mount at %s does not answer: %w", mountpoint, err)
	}
	return nil
}

// notifySystemd sends state ("READY=1", "STOPPING=1") to the service
// manager, if there is one; a failure is logged, never fatal.
func notifySystemd(state string, log *slog.Logger) {
	sent, err := daemon.SdNotify(false, state)
	switch {
	case err != nil:
		log.Warn("telling systemd failed", "state", state, "err", err)
	case sent:
		log.Info("told systemd", "state", state)
	}
}
