//go:build e2e

package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	mountTimeout   = 2 * time.Minute
	unmountTimeout = 30 * time.Second
)

// lockedBuffer collects a subprocess's output while tests read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fgMount is a `shardfs mount --foreground` subprocess and its mount point.
type fgMount struct {
	dir    string
	cmd    *exec.Cmd
	output *lockedBuffer
	exited chan struct{} // closed once the process has been waited for
	err    error         // its exit status, valid after exited is closed
}

// mountShardfs mounts source on a fresh directory with the mount served by
// `shardfs mount --foreground` in a subprocess (flags before positionals,
// endpoint and credentials of the test MinIO). The mount is unmounted and
// the process reaped when the test ends.
func mountShardfs(t *testing.T, source string, args ...string) *fgMount {
	t.Helper()
	dir := t.TempDir()
	suite := passthroughSuiteFlags(t, source, args)
	argv := append(append([]string{"mount", "--foreground"}, suite...), args...)
	if strings.HasPrefix(source, "s3://") {
		argv = append(argv, e2e.endpoint()...)
	}
	m := startMount(t, dir, append(argv, source, dir), e2e.env())
	if suite != nil {
		t.Cleanup(func() { countSuiteOpens(m) }) // runs before the stop registered above
	}
	return m
}

// startMount runs shardfs with argv (which must mount dir in the foreground)
// and env, waits until dir shows in /proc/self/mountinfo, and registers the
// cleanup: SIGTERM, which must unmount and exit 0.
func startMount(t *testing.T, dir string, argv, env []string) *fgMount {
	t.Helper()
	m := &fgMount{dir: dir, output: &lockedBuffer{}, exited: make(chan struct{})}
	m.cmd = exec.Command(e2e.bin, argv...)
	m.cmd.Env = env
	m.cmd.Stdout, m.cmd.Stderr = m.output, m.output
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start shardfs %s: %v", strings.Join(argv, " "), err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() { m.stop(t) })
	if err := waitMountState(dir, true, m.exited, mountTimeout); err != nil {
		t.Fatalf("shardfs %s: %v\noutput:\n%s", strings.Join(argv, " "), err, m.output.String())
	}
	// The kernel lists the mount before the daemon has set it up (the
	// read-ahead of its bdi, which a file opened earlier never sees): the
	// mount is ready when the daemon logs so.
	if err := m.waitLogged("msg=mounted", mountTimeout); err != nil {
		t.Fatalf("shardfs %s: %v\noutput:\n%s", strings.Join(argv, " "), err, m.output.String())
	}
	return m
}

// waitLogged waits until the mount's output holds text.
func (m *fgMount) waitLogged(text string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(m.output.String(), text) {
		select {
		case <-m.exited:
			return fmt.Errorf("shardfs exited before it logged %q", text)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%q not logged after %v", text, timeout)
		}
	}
	return nil
}

// stop sends SIGTERM and checks that shardfs unmounts and exits cleanly.
// A mount that will not go is detached with fusermount3 so later tests run.
func (m *fgMount) stop(t *testing.T) {
	t.Helper()
	select {
	case <-m.exited:
		if m.err != nil {
			t.Errorf("shardfs on %s exited by itself: %v\noutput:\n%s", m.dir, m.err, m.output.String())
		}
	default:
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-m.exited:
		if m.err != nil {
			t.Errorf("shardfs on %s after SIGTERM: %v (want exit status 0)\noutput:\n%s", m.dir, m.err, m.output.String())
		}
	case <-time.After(unmountTimeout):
		// SIGQUIT makes the Go runtime print every goroutine's stack and
		// exit: the output then says where the shutdown is stuck.
		m.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-m.exited:
		case <-time.After(10 * time.Second):
			m.cmd.Process.Kill()
			<-m.exited
		}
		t.Errorf("shardfs on %s still running %v after SIGTERM\noutput (goroutines at the end):\n%s", m.dir, unmountTimeout, m.output.String())
	}
	if isMounted(m.dir) {
		t.Errorf("%s still mounted after shardfs exited", m.dir)
		exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	}
}

// path returns the path of key inside the mount.
func (m *fgMount) path(key string) string { return filepath.Join(m.dir, filepath.FromSlash(key)) }

// result is how one shardfs command ended.
type result struct {
	code   int // exit status; -1 when it did not exit by itself
	stdout string
	stderr string
	err    error // set when the command could not be run or overran
}

// runShardfs runs one shardfs command to completion. A command that returns
// but leaves a child holding its stdout or stderr open (a daemon that did not
// detach) is reported in err.
func runShardfs(env []string, timeout time.Duration, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e.bin, args...)
	cmd.Env = env
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.err = ctx.Err()
	case errors.Is(err, exec.ErrWaitDelay):
		r.err = errors.New("shardfs returned but a child kept its stdout/stderr open (daemon did not detach from them)")
	case err != nil && !errors.As(err, &exitErr):
		r.err = err
	}
	return r
}

// mountDaemon mounts source on a fresh directory with the daemonized form
// (no --foreground; flags after the positionals), which must exit 0 with the
// mount ready. The test's cleanup runs `shardfs unmount`.
func mountDaemon(t *testing.T, source string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	argv := append([]string{"mount", source, dir}, args...)
	if strings.HasPrefix(source, "s3://") {
		argv = append(argv, e2e.endpoint()...)
	}
	r := runShardfs(e2e.env(), mountTimeout, argv...)
	t.Cleanup(func() { unmountDaemon(t, dir) })
	if r.err != nil || r.code != 0 {
		t.Fatalf("shardfs %s: exit %d, %v\nstderr: %s", strings.Join(argv, " "), r.code, r.err, r.stderr)
	}
	if !isMounted(dir) {
		t.Fatalf("shardfs mount exited 0 but %s is not mounted (it must return only once the mount is ready)", dir)
	}
	return dir
}

func unmountDaemon(t *testing.T, dir string) {
	t.Helper()
	if !isMounted(dir) {
		return
	}
	r := runShardfs(e2e.env(), unmountTimeout, "unmount", dir)
	if r.err != nil || r.code != 0 {
		t.Errorf("shardfs unmount %s: exit %d, %v\nstderr: %s", dir, r.code, r.err, r.stderr)
	}
	if isMounted(dir) {
		t.Errorf("%s still mounted after shardfs unmount", dir)
		exec.Command("fusermount3", "-u", "-z", dir).Run()
	}
	if pids := waitNoServer(dir, unmountTimeout); len(pids) > 0 {
		t.Errorf("shardfs processes %v for %s still running after unmount", pids, dir)
	}
}

// serverPids returns the pids of shardfs processes (of the binary under
// test) whose command line names dir.
func serverPids(dir string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, p := range procs {
		exe, err := os.Readlink(p + "/exe")
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != e2e.bin {
			continue
		}
		cmdline, err := os.ReadFile(p + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoServer waits for the shardfs processes serving dir to exit (a
// process of another parent offers nothing to wait on but polling) and
// returns those still running at the timeout.
func waitNoServer(dir string, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		pids := serverPids(dir)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}
