//go:build e2e

package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mountHelper makes the binary under test reachable the way the README
// installs it: mount(8) hands type fuse.NAME to fuse3's /sbin/mount.fuse,
// which runs NAME from the standard PATH as `NAME SOURCE DIR -o OPTS`. A
// link with a name of this run's own (not /usr/local/bin/shardfs itself,
// which may be a user's install) gives the same path through mount(8). It
// returns the file system type to pass to mount -t.
func mountHelper(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/sbin/mount.fuse"); err != nil {
		t.Fatalf("fuse3's /sbin/mount.fuse is missing (apt-get install fuse3): %v", err)
	}
	name := fmt.Sprintf("shardfs-e2e-%d", os.Getpid())
	link := filepath.Join("/usr/local/bin", name)
	if err := os.Symlink(e2e.bin, link); err != nil && !os.IsExist(err) {
		t.Fatalf("linking %s for mount(8) (needs root): %v", link, err)
	}
	t.Cleanup(func() { os.Remove(link) })
	return "fuse." + name
}

// runMount runs util-linux mount or umount as a user would.
func runMount(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mountTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e2e.env()
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		r.err = ctx.Err()
	} else if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		r.err = err
	}
	t.Logf("%s %s: exit %d, stderr %q", name, strings.Join(args, " "), r.code, r.stderr)
	return r
}

// mountedByMount8 requires a successful mount(8) of dir, then reads every
// object through it and unmounts it with umount(8).
func mountedByMount8(t *testing.T, dir string, r result) {
	t.Helper()
	t.Cleanup(func() {
		if isMounted(dir) {
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
	})
	if r.err != nil || r.code != 0 || !isMounted(dir) {
		t.Fatalf("mount: exit %d, %v, mounted %v; want exit 0 with %s mounted\nstderr: %s", r.code, r.err, isMounted(dir), dir, r.stderr)
	}
	if n, err := mountEntries("/proc/mounts", dir); err != nil || n != 1 {
		t.Errorf("/proc/mounts lists %s %d times (%v), want once", dir, n, err)
	}
	checkShards(t, dir, e2e.objects)
	if u := runMount(t, "umount", dir); u.code != 0 || isMounted(dir) {
		t.Fatalf("umount %s: exit %d, still mounted %v: %s", dir, u.code, isMounted(dir), u.stderr)
	}
	if pids := waitNoServer(dir, unmountTimeout); len(pids) > 0 {
		t.Errorf("shardfs processes %v still serve %s after umount", pids, dir)
	}
}

func TestMountCommand(t *testing.T) {
	fstype := mountHelper(t)
	dir, cacheDir := t.TempDir(), t.TempDir()
	opts := "endpoint_url=" + e2e.minio.url + ",cache-dir=" + cacheDir + ",cache_size=512MiB,_netdev,nofail,ro,noatime"
	r := runMount(t, "mount", "-t", fstype, e2e.source(), dir, "-o", opts)
	mountedByMount8(t, dir, r)
	if entries, err := os.ReadDir(cacheDir); err != nil || len(entries) == 0 {
		t.Errorf("cache_dir=%s: the directory holds nothing after the mount (%v): the option did not reach the daemon", cacheDir, err)
	}
}

func TestFstabEntry(t *testing.T) {
	fstype := mountHelper(t)
	dir := t.TempDir()
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := fmt.Sprintf("%s %s %s endpoint_url=%s,memory_cache_size=0,_netdev,nofail,noauto,x-systemd.automount 0 0\n",
		e2e.source(), dir, fstype, e2e.minio.url)
	if err := os.WriteFile(fstab, []byte("# shardfs\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	// `mount DIR` with the entry in /etc/fstab; --fstab keeps the test off the system's file.
	r := runMount(t, "mount", "--fstab", fstab, dir)
	mountedByMount8(t, dir, r)
}

func TestMountCommandBadOption(t *testing.T) {
	fstype := mountHelper(t)
	for _, tc := range []struct{ opts, cause string }{
		{"endpoint_url=" + e2e.minio.url + ",cache_dri=/tmp/x,_netdev", `unknown mount option "cache_dri"`},
		{"endpoint_url=" + e2e.minio.url + ",cache_size=lots", `cache-size`},
	} {
		dir := t.TempDir()
		r := runMount(t, "mount", "-t", fstype, e2e.source(), dir, "-o", tc.opts)
		checkFailedCleanly(t, r, []string{"(through mount -t) -o", tc.opts}, tc.cause, dir, 0)
	}
}
