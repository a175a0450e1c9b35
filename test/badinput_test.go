//go:build e2e

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBadInputFailsCleanly: each mistake a user can make gives a non-zero
// exit, exactly one line on stderr naming the cause, nothing mounted and no
// daemon left. The daemonized form is used, as a user would type it: what
// the mount logs while it still tries (retries, warnings) goes to its log.
func TestBadInputFailsCleanly(t *testing.T) {
	t.Parallel()
	deadEndpoint := "http://127.0.0.1:" + strconv.Itoa(refusingPort(t))
	notADir := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A cache dir on a filesystem too small for the default ring: opening
	// it warns of a smaller ring, a warning the terminal shows only with a
	// mount that comes up.
	smallCache := t.TempDir()
	if err := unix.Mount("tmpfs", smallCache, "tmpfs", 0, "size=96m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(smallCache, unix.MNT_DETACH) })

	cases := []struct {
		name string
		// args builds the command line for a fresh, empty mount point dir.
		args  func(dir string) []string
		env   []string
		cause string // regexp (case-insensitive) the stderr line must match
	}{
		{"no such bucket", func(d string) []string {
			return append([]string{"mount", "s3://no-such-bucket-shardfs/x", d}, e2e.endpoint()...)
		}, nil, `no such bucket|bucket .*(not exist|not found)`},
		{"wrong secret key", func(d string) []string {
			return append([]string{"mount", e2e.source(), d}, e2e.endpoint()...)
		}, []string{"AWS_SECRET_ACCESS_KEY=wrong-secret-key"}, `credential|access denied|signature|forbidden`},
		{"unknown access key", func(d string) []string {
			return append([]string{"mount", e2e.source(), d}, e2e.endpoint()...)
		}, []string{"AWS_ACCESS_KEY_ID=nobody"}, `credential|access denied|access key|forbidden`},
		{"endpoint not listening", func(d string) []string {
			return []string{"mount", e2e.source(), d, "--endpoint-url", deadEndpoint}
		}, nil, `connect|unreachable|refused`},
		{"endpoint not listening, cache dir on a small filesystem", func(d string) []string {
			return []string{"mount", e2e.source(), d, "--endpoint-url", deadEndpoint, "--cache-dir", smallCache}
		}, nil, `connect|unreachable|refused`},
		{"missing mountpoint", func(d string) []string {
			return append([]string{"mount", e2e.source(), filepath.Join(d, "does-not-exist")}, e2e.endpoint()...)
		}, nil, `mountpoint|mount point`},
		{"mountpoint is a file", func(d string) []string {
			return append([]string{"mount", e2e.source(), notADir}, e2e.endpoint()...)
		}, nil, `mountpoint|mount point|not a directory`},
		{"unknown flag", func(d string) []string {
			return append([]string{"mount", e2e.source(), d, "--no-such-flag"}, e2e.endpoint()...)
		}, nil, `flag provided but not defined|unknown flag|no-such-flag`},
		{"malformed source s3://", func(d string) []string {
			return append([]string{"mount", "s3://", d}, e2e.endpoint()...)
		}, nil, `source|bucket`},
		{"malformed source ftp://", func(d string) []string {
			return append([]string{"mount", "ftp://x", d}, e2e.endpoint()...)
		}, nil, `source|scheme|ftp`},
		{"missing local source", func(d string) []string {
			return []string{"mount", filepath.Join(d, "no-such-source-dir"), d}
		}, nil, `source|no such|not exist`},
		{"missing mountpoint argument", func(d string) []string {
			return append([]string{"mount", e2e.source()}, e2e.endpoint()...)
		}, nil, `mountpoint|mount point|argument|usage`},
		{"unknown page cache policy", func(d string) []string {
			return append([]string{"mount", e2e.source(), d, "--page-cache", "sometimes"}, e2e.endpoint()...)
		}, nil, `page-cache.*sometimes`},
		{"unknown cache lag choice", func(d string) []string {
			return append([]string{"mount", e2e.source(), d, "--cache-lag", "sometimes"}, e2e.endpoint()...)
		}, nil, `cache-lag.*sometimes.*skip or wait`},
		{"unknown shared RAM tier choice", func(d string) []string {
			return append([]string{"mount", e2e.source(), d, "--memory-cache-shared", "maybe"}, e2e.endpoint()...)
		}, nil, `memory-cache-shared.*maybe`},
		{"shared RAM tier larger than /dev/shm", func(d string) []string {
			return append([]string{"mount", e2e.source(), d, "--memory-cache-shared", "on", "--memory-cache-size", "1PiB"}, e2e.endpoint()...)
		}, nil, `shared memory cache /dev/shm/shardfs-ram\.[0-9]+ \(1\.0 PiB\): no space left on device \(a smaller --memory-cache-size, or --memory-cache-shared off\)`},
		{"nonsense size", func(d string) []string {
			return append([]string{"mount", e2e.source(), d, "--block-size", "banana"}, e2e.endpoint()...)
		}, nil, `block-size|size`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args := c.args(dir)
			r := runShardfs(e2e.env(c.env...), 90*time.Second, args...)
			checkFailedCleanly(t, r, args, c.cause, dir, 0)
		})
	}
}

func TestMountOnBusyMountpointFails(t *testing.T) {
	t.Parallel()
	m := mountShardfs(t, e2e.data)
	args := append([]string{"mount", e2e.source(), m.dir}, e2e.endpoint()...)
	r := runShardfs(e2e.env(), 90*time.Second, args...)
	checkFailedCleanly(t, r, args, `already mounted|busy|in use`, m.dir, 1)
	if _, err := os.Stat(filepath.Join(m.dir, "shard-000000.tar")); err != nil {
		t.Errorf("the first mount is broken after the refused second mount: %v", err)
	}
}

// checkFailedCleanly asserts a failed command: non-zero exit, exactly one
// stderr line, matching cause, dir listed `mounts` times in /proc/mounts, and no
// shardfs process left serving dir.
func checkFailedCleanly(t *testing.T, r result, args []string, cause, dir string, mounts int) {
	t.Helper()
	cmdline := "shardfs " + strings.Join(args, " ")
	t.Logf("%s: exit %d, stderr %q", cmdline, r.code, r.stderr)
	if r.err != nil {
		t.Errorf("%s: %v", cmdline, r.err)
	}
	if r.code == 0 {
		t.Errorf("%s: exit status 0, want non-zero", cmdline)
	}
	// Exactly one line: text, then one newline. Warnings, blank lines or
	// a second message before or after it all count as lines.
	stderr := strings.TrimSuffix(r.stderr, "\n")
	switch {
	case strings.TrimSpace(stderr) == "":
		t.Errorf("%s: stderr %q, want one line naming the cause", cmdline, r.stderr)
	case stderr == r.stderr || strings.Contains(stderr, "\n"):
		t.Errorf("%s: %d lines on stderr, want exactly one ending in a newline:\n%s", cmdline, strings.Count(r.stderr, "\n"), r.stderr)
	}
	if !regexp.MustCompile("(?i)" + cause).MatchString(stderr) {
		t.Errorf("%s: stderr %q does not name the cause (want /%s/)", cmdline, stderr, cause)
	}
	if n, err := mountEntries("/proc/mounts", dir); err != nil || n != mounts {
		t.Errorf("%s: /proc/mounts lists %s %d times (err %v), want %d", cmdline, dir, n, err, mounts)
		if n > mounts {
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
	}
	if mounts == 0 {
		if pids := waitNoServer(dir, 10*time.Second); len(pids) > 0 {
			t.Errorf("%s: shardfs processes %v left running", cmdline, pids)
		}
	}
}

// refusingPort is a 127.0.0.1 TCP port that refuses connections for the
// rest of the test: a socket bound to it and never listening holds it, so
// no other process (a server of a test running beside this one) can take
// it, as it could a port found free and let go.
func refusingPort(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*unix.SockaddrInet4).Port
}
