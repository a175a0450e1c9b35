//go:build e2e

package test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardfs/shardfs/gds"
)

// TestGDSWholeFileThroughMount asks WHOLE_FILE of a real mount whose cache
// was warmed before it: the warmed shard's own file (its path in the
// cache dir, its size, the shard's bytes) on the ctl file and on the
// shard's fd; ENODATA for a shard not held whole and, after the source
// changed, for the old version's file; EACCES and no path for another
// uid, which still reads the shard through the mount.
func TestGDSWholeFileThroughMount(t *testing.T) {
	t.Parallel()
	u := newOtherUser(t)
	shared := sharedDir(t)
	helper := helperIn(t, shared)
	src := filepath.Join(shared, "src")
	const whole, cold = "w/whole.tar", "cold.tar"
	data := writeRandomFiles(t, src, map[string]int{whole: 2<<20 + 77, cold: 1 << 20})
	cacheDir := filepath.Join(shared, "cache")
	cache := []string{"--cache-dir", cacheDir, "--cache-size", "64MiB"}
	r := mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", src, "--include", "w/*"}, cache...)...)
	if !strings.Contains(r.stdout, "1 held as whole files") {
		t.Fatalf("warm did not make %s whole: %s", whole, r.stdout)
	}
	mnt := filepath.Join(shared, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"mount", "--foreground", "--allow-other", "--metadata-ttl", "1s"}, cache...)
	startMount(t, mnt, append(argv, src, mnt), e2e.env())

	ctl, err := os.Open(filepath.Join(mnt, ".shardfs", "ctl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	ask := func(f *os.File, path string) (gds.WholeFileReq, error) {
		reply, err := call(int(f.Fd()), gds.CmdWholeFile, gds.WholeFileReq{Path: path})
		if err != nil {
			return gds.WholeFileReq{}, err
		}
		return gds.DecodeWholeFile(reply)
	}
	sf, err := os.Open(filepath.Join(mnt, whole))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	var named string
	for door, f := range map[string]*os.File{"ctl": ctl, "fd": sf} {
		path := whole
		if door == "fd" {
			path = ""
		}
		got, err := ask(f, path)
		if err != nil {
			t.Fatalf("WHOLE_FILE of the warmed shard on the %s: %v", door, err)
		}
		if got.Size != uint64(len(data[whole])) || filepath.Dir(got.File) != filepath.Join(cacheDir, "shards") {
			t.Fatalf("WHOLE_FILE on the %s: %+v; want %d bytes, a file in %s/shards", door, got, len(data[whole]), cacheDir)
		}
		if b, err := os.ReadFile(got.File); err != nil || !bytes.Equal(b, data[whole]) {
			t.Fatalf("the file WHOLE_FILE named (%s) does not hold %s: %d bytes, %v", got.File, whole, len(b), err)
		}
		named = got.File
	}
	if _, err := ask(ctl, cold); err != syscall.ENODATA {
		t.Errorf("WHOLE_FILE of a shard not warmed: %v, want ENODATA", err)
	}
	if _, err := ask(ctl, "no/such.tar"); err != syscall.ENOENT {
		t.Errorf("WHOLE_FILE of no shard: %v, want ENOENT", err)
	}

	// Another uid could not open the daemon's 0600 files: no path at all.
	p := hostile(t, helper, &u, "whole-file", mnt, whole)
	for door, want := range map[string]string{"ctl": "EACCES", "fd": "EACCES", "read_mount": "OK"} {
		if p[door] != want {
			t.Errorf("the other user's %s: %v, want %s", door, p[door], want)
		}
	}
	for _, k := range []string{"ctl_file", "fd_file"} {
		if p[k] != nil {
			t.Errorf("the other user was given a path: %s = %v", k, p[k])
		}
	}

	// A new version of the shard in the source: the file of the old one is
	// never named for it again.
	fresh := bytes.Repeat([]byte{0x5a}, len(data[whole]))
	if err := os.WriteFile(filepath.Join(src, whole), fresh, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := ask(ctl, whole)
		if err == syscall.ENODATA {
			break
		}
		if err != nil || got.File != named || time.Now().After(deadline) {
			t.Fatalf("WHOLE_FILE after the source changed: %+v, %v; want ENODATA once the listing is refreshed", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, whole)); err != nil || !bytes.Equal(b, fresh) {
		t.Errorf("the mount after the change: %d bytes, %v; want the new content", len(b), err)
	}
}
