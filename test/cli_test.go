//go:build e2e

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// checkOneFile reads one small shard through the mount at dir.
func checkOneFile(t *testing.T, dir string) {
	t.Helper()
	o := e2e.smallShards()[0]
	sum, n, err := fileSHA256(filepath.Join(dir, o.key))
	if err != nil || n != o.size || sum != o.sha256 {
		t.Errorf("%s through the mount: %d bytes, sha256 %s, err %v; want %d bytes %s", o.key, n, sum, err, o.size, o.sha256)
	}
}

func TestFlagsAfterPositionals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argv := append([]string{"mount", e2e.source(), dir, "--region", region, "--foreground"}, e2e.endpoint()...)
	m := startMount(t, dir, argv, e2e.env())
	checkOneFile(t, m.dir)
}

func TestEnvironmentVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No S3 flags at all: endpoint and region come from SHARDFS_* variables.
	env := e2e.env("SHARDFS_ENDPOINT_URL="+e2e.minio.url, "SHARDFS_REGION="+region, "AWS_REGION=")
	m := startMount(t, dir, []string{"mount", "--foreground", e2e.source(), dir}, env)
	checkOneFile(t, m.dir)
}

func TestSharedCredentialsProfile(t *testing.T) {
	t.Parallel()
	creds := filepath.Join(t.TempDir(), "credentials")
	content := "[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong-secret\n\n" +
		"[shardfs-e2e]\naws_access_key_id = " + accessKey + "\naws_secret_access_key = " + secretKey + "\n"
	if err := os.WriteFile(creds, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := e2e.env("AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SHARED_CREDENTIALS_FILE="+creds)
	argv := append([]string{"mount", "--foreground", "--profile", "shardfs-e2e"}, e2e.endpoint()...)
	m := startMount(t, dir, append(argv, e2e.source(), dir), env)
	checkOneFile(t, m.dir)
}

func TestDaemonMountAndUnmount(t *testing.T) {
	t.Parallel()
	dir := mountDaemon(t, e2e.source())
	checkOneFile(t, dir)
	if pids := serverPids(dir); len(pids) == 0 {
		t.Errorf("no shardfs process serves %s after the daemonized mount returned", dir)
	}
	unmountDaemon(t, dir)

	r := runShardfs(e2e.env(), unmountTimeout, "unmount", dir)
	if r.code == 0 || strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") != 0 || r.stderr == "" {
		t.Errorf("shardfs unmount of a directory that is not mounted: exit %d, stderr %q; want non-zero and one line", r.code, r.stderr)
	}
}

func TestForegroundSignalsUnmount(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			m := mountShardfs(t, e2e.data)
			checkOneFile(t, m.dir)
			m.cmd.Process.Signal(sig)
			select {
			case <-m.exited:
			case <-time.After(unmountTimeout):
				t.Fatalf("shardfs still running %v after %v", unmountTimeout, sig)
			}
			if m.err != nil {
				t.Errorf("shardfs after %v: %v, want exit status 0\n%s", sig, m.err, m.output.String())
			}
			if isMounted(m.dir) {
				t.Errorf("%s still mounted after %v", m.dir, sig)
			}
		})
	}
}

// TestMountHelp: `shardfs mount --help` explains every flag and names its
// SHARDFS_* variable.
func TestMountHelp(t *testing.T) {
	t.Parallel()
	r := runShardfs(e2e.env(), time.Minute, "mount", "--help")
	if r.err != nil || r.code != 0 {
		t.Fatalf("shardfs mount --help: exit %d, %v\n%s", r.code, r.err, r.stderr)
	}
	help := r.stdout + r.stderr
	for _, flag := range []string{"allow-other", "debug-fuse", "foreground", "gid", "log-file", "log-level",
		"manifest", "metrics-addr", "uid", "block-size", "cache-dir", "cache-size", "memory-cache-size",
		"max-background", "read-ahead-kb", "max-concurrency", "max-prefetch", "part-size", "prefetch-memory",
		"prefetch-next", "endpoint-url", "force-path-style", "profile", "region", "retry-timeout",
		"stall-timeout"} {
		// "--flag value   an explanation of a few words ..."
		if !regexp.MustCompile(`(?m)^\s+--` + flag + `\b[^\n]*\s{2,}\S+( \S+){3,}`).MatchString(help) {
			t.Errorf("mount --help does not explain --%s", flag)
		}
		env := "SHARDFS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
		if !strings.Contains(help, env) {
			t.Errorf("mount --help does not name %s for --%s", env, flag)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	// "shardfs v1.2.3 go1.26.1", "shardfs (devel) (0123456789ab) go1.26.1"
	want := regexp.MustCompile(`^shardfs \S+( \([0-9a-f]{12}\))? go1\.\d+\S*\n$`)
	var first string
	for _, arg := range []string{"version", "--version", "-v"} {
		r := runShardfs(e2e.env(), time.Minute, arg)
		if r.err != nil || r.code != 0 || !want.MatchString(r.stdout) {
			t.Errorf("shardfs %s: exit %d, %v, stdout %q", arg, r.code, r.err, r.stdout)
		}
		if first == "" {
			first = r.stdout
		} else if r.stdout != first {
			t.Errorf("shardfs %s printed %q, shardfs version %q", arg, r.stdout, first)
		}
	}
}

// TestUsageErrorNamesItsHelp: a mistake on the command line is one line
// that points at the help explaining it: the program's before any command,
// the command's after one.
func TestUsageErrorNamesItsHelp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"--no-such-flag"}, "(see 'shardfs --help')"},
		{[]string{"ls", "--no-such-flag"}, "(see 'shardfs ls --help')"},
		{[]string{"cache", "verify", "--no-such-flag"}, "(see 'shardfs cache verify --help')"},
	} {
		r := runShardfs(e2e.env(), time.Minute, c.args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code != 2 || strings.Contains(line, "\n") || !strings.HasSuffix(line, c.help) {
			t.Errorf("shardfs %s: exit %d, stderr %q; want exit 2 and one line ending %q",
				strings.Join(c.args, " "), r.code, r.stderr, c.help)
		}
	}
}

// parseLs parses `shardfs ls` output: "SIZE<TAB>KEY" lines.
func parseLs(t *testing.T, out string) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		size, key, ok := strings.Cut(line, "\t")
		if _, err := strconv.ParseInt(size, 10, 64); !ok || err != nil {
			t.Errorf("shardfs ls: line %q is not SIZE<TAB>KEY", line)
			continue
		}
		got = append(got, size+"\t"+key)
	}
	sort.Strings(got)
	return got
}

func TestLsListsKeysAndSizes(t *testing.T) {
	t.Parallel()
	var want []string
	for _, o := range e2e.objects {
		want = append(want, strconv.FormatInt(o.size, 10)+"\t"+o.key)
	}
	sort.Strings(want)
	for name, argv := range map[string][]string{
		"s3":    append([]string{"ls", e2e.source()}, e2e.endpoint()...),
		"local": {"ls", e2e.data},
	} {
		t.Run(name, func(t *testing.T) {
			r := runShardfs(e2e.env(), 2*time.Minute, argv...)
			if r.err != nil || r.code != 0 {
				t.Fatalf("shardfs %s: exit %d, %v\n%s", strings.Join(argv, " "), r.code, r.err, r.stderr)
			}
			assertSameList(t, "shardfs ls", parseLs(t, r.stdout), want)
		})
	}
}

// As root, shardfs needs no fusermount, which container images and bare GPU
// nodes often lack: the daemon mounts with mount(2), and `shardfs unmount`
// unmounts with umount(2). The test runs in a mount namespace of its own,
// where /dev/null hides the fusermount that go-fuse would otherwise find in
// /bin whatever the PATH. The daemon's descriptors of /dev/fuse are
// close-on-exec: a child that inherited one would keep the connection
// alive after the daemon died, and hang in its own request to the mount.
func TestRootWithoutFusermount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mount(2) needs root (CI runs the tests as root)")
	}
	o := e2e.smallShards()[0]
	dir := t.TempDir()
	script := `set -e
for f in /bin/fusermount3 /bin/fusermount /usr/bin/fusermount3 /usr/bin/fusermount; do
	if [ -e "$f" ]; then mount --bind /dev/null "$f"; fi
done
env PATH="$EMPTY" "$BIN" mount "$SOURCE" "$DIR" --endpoint-url "$ENDPOINT"
sha256sum "$DIR/$KEY"
for p in $(pgrep -f -- "$DIR"); do
	if [ "$(readlink /proc/$p/exe)" = "$BIN" ]; then
		for fd in /proc/$p/fd/*; do
			if [ "$(readlink "$fd")" = /dev/fuse ]; then echo "fuse-fd-flags $(awk '/^flags:/ {print $2}' /proc/$p/fdinfo/${fd##*/})"; fi
		done
	fi
done
env PATH="$EMPTY" "$BIN" unmount "$DIR"
if grep -q " $DIR " /proc/self/mountinfo; then echo "$DIR still mounted after shardfs unmount"; exit 1; fi`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	cmd.Env = e2e.env("EMPTY="+t.TempDir(), "BIN="+e2e.bin, "SOURCE="+e2e.source(), "DIR="+dir,
		"ENDPOINT="+e2e.endpoint()[1], "KEY="+o.key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mount, read and unmount with no fusermount, as root: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), o.sha256+" ") {
		t.Errorf("%s through a mount made without fusermount: %s; want sha256 %s", o.key, out, o.sha256)
	}
	fuseFDs := 0
	for _, line := range strings.Split(string(out), "\n") {
		flags, ok := strings.CutPrefix(line, "fuse-fd-flags ")
		if !ok {
			continue
		}
		fuseFDs++
		if v, err := strconv.ParseUint(flags, 8, 64); err != nil || v&syscall.O_CLOEXEC == 0 {
			t.Errorf("the daemon holds /dev/fuse with flags %s: not close-on-exec, so a child it starts keeps the connection", flags)
		}
	}
	if fuseFDs == 0 {
		t.Errorf("no /dev/fuse descriptor found in the daemon's /proc/PID/fd:\n%s", out)
	}
	if pids := waitNoServer(dir, unmountTimeout); len(pids) > 0 {
		t.Errorf("shardfs processes %v for %s still running after unmount", pids, dir)
	}
}
