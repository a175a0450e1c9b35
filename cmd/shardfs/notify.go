package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/coreos/go-systemd/v22/daemon"

	shardfs "github.com/shardfs/shardfs/fs"
)

// A mount run by systemd (Type=notify, see deploy/shardfs@.service) says
// READY=1 on $NOTIFY_SOCKET once it serves, and STOPPING=1 when a signal
// starts the unmount. Without NOTIFY_SOCKET both are no-ops.

// checkAnswers looks up the mount's control file through the kernel and
// returns its device: the mount is serving only when a lookup and a
// getattr come back from this daemon. Readiness (the daemonize pipe,
// systemd) is reported after it.
//
// The lookup is made by a child process (this binary, told by
// answerCheckEnv to stat one path, print its device and exit), never by
// the daemon itself (fs.Mount says why).
func checkAnswers(mountpoint string) (dev uint64, err error) {
	ctl := filepath.Join(mountpoint, shardfs.SideDir, "ctl")
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("checking that the mount at %s answers: %w", mountpoint, err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), answerCheckEnv+"="+ctl)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("the mount at %s does not answer: %s", mountpoint, strings.TrimSpace(stderr.String()+" "+err.Error()))
	}
	dev, err = strconv.ParseUint(strings.TrimSpace(stdout.String()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("checking that the mount at %s answers: the check printed %q", mountpoint, stdout.String())
	}
	return dev, nil
}

// answerCheckEnv names the path a child started by checkAnswers stats.
const answerCheckEnv = "SHARDFS_ANSWER_CHECK"

// answerCheck is the child's side of checkAnswers: when answerCheckEnv is
// set, stat its path, print its device (or what failed), and exit.
func answerCheck() {
	path, ok := os.LookupEnv(answerCheckEnv)
	if !ok {
		return
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		fmt.Fprintln(os.Stderr, &os.PathError{Op: "stat", Path: path, Err: err})
		os.Exit(1)
	}
	fmt.Println(st.Dev)
	os.Exit(0)
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
