package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// readyEnv names the fd on which a daemonized mount reports readiness:
// "ready" once the kernel has the mount, else the one-line error.
const readyEnv = "SHARDFS_READY_FD"

// daemonize starts this command again in the foreground, detached, and
// waits until it says the mount is ready or why it is not.
func daemonize(args []string, logPath string, terminal io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, append(append([]string{}, args...), "--foreground")...)
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.Stdin = nil
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the mount daemon: %w", err)
	}
	w.Close()
	// Warnings are held until the outcome is known: they say what a ready
	// mount does differently, so they are printed with a mount that came
	// up. A mount that fails prints its one line only; the warnings it
	// gave on the way are in the log.
	var warnings []string
	pipe := bufio.NewReader(r)
	line, err := pipe.ReadString('\n')
	line = strings.TrimSpace(line)
	for strings.HasPrefix(line, warningPrefix) {
		warnings = append(warnings, line)
		line, err = pipe.ReadString('\n')
		line = strings.TrimSpace(line)
	}
	if line == "ready" {
		for _, w := range warnings {
			fmt.Fprintln(terminal, "shardfs: "+w)
		}
		return cmd.Process.Release()
	}
	waitErr := cmd.Wait()
	if line != "" {
		return errors.New(strings.TrimPrefix(line, "shardfs: "))
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("waiting for the mount daemon: %w", err)
	}
	return fmt.Errorf("the mount daemon exited before the mount was ready (%v); see %s", waitErr, logPath)
}

// readyReporter is the daemon's side of the pipe; nil in plain foreground.
type readyReporter struct {
	mu     sync.Mutex
	f      *os.File
	warned int
}

func newReadyReporter() *readyReporter {
	v := os.Getenv(readyEnv)
	if v == "" {
		return nil
	}
	os.Unsetenv(readyEnv)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return nil
	}
	return &readyReporter{f: os.NewFile(uintptr(fd), "ready")}
}

func (r *readyReporter) ready() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	fmt.Fprintln(r.f, "ready")
	r.f.Close()
	r.f = nil
}

func (r *readyReporter) failed(err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	fmt.Fprintln(r.f, strings.ReplaceAll(err.Error(), "\n", " "))
	r.f.Close()
	r.f = nil
}

// defaultLogPath keeps one log per mount point under the user's cache dir.
func defaultLogPath(mountpoint string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	name := strings.Trim(strings.ReplaceAll(mountpoint, "/", "_"), "_")
	if name == "" {
		name = "root"
	}
	return filepath.Join(base, "shardfs", "logs", name+".log")
}
