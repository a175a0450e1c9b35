//go:build e2e

package test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestS3MountMatchesBucket(t *testing.T) {
	t.Parallel()
	m := mountShardfs(t, e2e.source())
	checkTree(t, m.dir, e2e.objects)
}

func TestLocalMountMatchesDirectory(t *testing.T) {
	t.Parallel()
	m := mountShardfs(t, e2e.data)
	checkTree(t, m.dir, e2e.objects)
}

// checkTree compares the tree under mnt with want the way a user would:
// find, stat, sha256 of every byte, ls -l, du, tar -t, dd, cat.
func checkTree(t *testing.T, mnt string, want []object) {
	t.Run("find", func(t *testing.T) { checkFind(t, mnt, want) })
	t.Run("stat", func(t *testing.T) { checkStat(t, mnt, want) })
	t.Run("sha256", func(t *testing.T) {
		for _, o := range want {
			sum, size, err := fileSHA256(filepath.Join(mnt, o.key))
			if err != nil {
				t.Errorf("%s: %v", o.key, err)
				continue
			}
			if size != o.size || sum != o.sha256 {
				t.Errorf("%s: read %d bytes with sha256 %s, want %d bytes with sha256 %s", o.key, size, sum, o.size, o.sha256)
			}
		}
	})
	t.Run("ls-l", func(t *testing.T) { checkLsL(t, mnt, want) })
	t.Run("du", func(t *testing.T) { checkDu(t, mnt, want) })
	t.Run("tar-t", func(t *testing.T) {
		for _, key := range []string{"shard-000000.tar", oddKey} {
			checkTarList(t, filepath.Join(mnt, key), filepath.Join(e2e.data, key))
		}
	})
	t.Run("dd-cat", func(t *testing.T) { checkDdCat(t, mnt) })
}

func checkFind(t *testing.T, mnt string, want []object) {
	out, err := exec.Command("find", mnt, "-type", "f", "-print0").Output()
	if err != nil {
		t.Fatalf("find %s -type f: %v", mnt, err)
	}
	var got []string
	for _, p := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p != "" {
			got = append(got, strings.TrimPrefix(p, mnt+"/"))
		}
	}
	sort.Strings(got)
	assertSameList(t, "find -type f", got, keys(want))

	// The control directory exists for tools but is not listed.
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatalf("readdir %s: %v", mnt, err)
	}
	for _, e := range entries {
		if e.Name() == ".shardfs" {
			t.Errorf("readdir of the mount root lists .shardfs; it must stay hidden")
		}
	}
}

func checkStat(t *testing.T, mnt string, want []object) {
	inodes := map[uint64]string{}
	for _, o := range want {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(mnt, o.key), &st); err != nil {
			t.Errorf("stat %s: %v", o.key, err)
			continue
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			t.Errorf("%s: mode %o, want a regular file", o.key, st.Mode)
		}
		if st.Size != o.size {
			t.Errorf("%s: st_size %d, want %d", o.key, st.Size, o.size)
		}
		if o.size > 0 && st.Blocks*512 < o.size {
			t.Errorf("%s: st_blocks %d covers %d bytes, less than its size %d (du would under-report)", o.key, st.Blocks, st.Blocks*512, o.size)
		}
		if mtime := time.Unix(st.Mtim.Unix()); mtime.Year() < 2020 {
			t.Errorf("%s: mtime %v; want the object's time", o.key, mtime)
		}
		if prev, dup := inodes[st.Ino]; dup {
			t.Errorf("%s and %s share inode %d", prev, o.key, st.Ino)
		}
		inodes[st.Ino] = o.key
	}
	// The external stat(1) on the name with spaces and non-ASCII characters.
	odd, _ := lookup(want, oddKey)
	out, err := exec.Command("stat", "-c", "%s %F", filepath.Join(mnt, oddKey)).Output()
	if got, wantLine := strings.TrimSpace(string(out)), fmt.Sprintf("%d regular file", odd.size); err != nil || got != wantLine {
		t.Errorf("stat -c '%%s %%F' %q: %q, %v; want %q", oddKey, got, err, wantLine)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mnt, "nested", "deeper"), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Errorf("nested/deeper: want a directory (err %v, mode %o)", err, st.Mode)
	}
}

// checkLsL checks the size column of `ls -l` for every top-level file.
func checkLsL(t *testing.T, mnt string, want []object) {
	out, err := exec.Command("ls", "-l", "--time-style=+%s", mnt).Output()
	if err != nil {
		t.Fatalf("ls -l %s: %v", mnt, err)
	}
	sizes := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 7 { // mode links owner group size time name
			sizes[f[6]] = f[4]
		}
	}
	for _, o := range want {
		if strings.Contains(o.key, "/") {
			continue
		}
		if got := sizes[o.key]; got != strconv.FormatInt(o.size, 10) {
			t.Errorf("ls -l: %s has size %q, want %d\n%s", o.key, got, o.size, out)
		}
	}
}

// checkDu checks du's apparent size per file and that the disk usage it
// reports covers the bytes (st_blocks filled in).
func checkDu(t *testing.T, mnt string, want []object) {
	out, err := exec.Command("du", "-a", "-b", mnt).Output()
	if err != nil {
		t.Fatalf("du -a -b %s: %v", mnt, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		size, path, _ := strings.Cut(line, "\t")
		got[strings.TrimPrefix(path, mnt+"/")] = size
	}
	var total int64
	for _, o := range want {
		total += o.size
		if got[o.key] != strconv.FormatInt(o.size, 10) {
			t.Errorf("du -a -b: %s is %q bytes, want %d", o.key, got[o.key], o.size)
		}
	}
	out, err = exec.Command("du", "-s", "-B1", mnt).Output()
	if err != nil {
		t.Fatalf("du -s -B1 %s: %v", mnt, err)
	}
	used, _ := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	if used < total {
		t.Errorf("du -s -B1 reports %d bytes used, less than the %d bytes of the files", used, total)
	}
}

// checkTarList compares `tar -tf` through the mount with the members of the
// source copy.
func checkTarList(t *testing.T, mounted, local string) {
	out, err := exec.Command("tar", "-tf", mounted).Output()
	if err != nil {
		t.Fatalf("tar -tf %s: %v", mounted, err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	f, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", local, err)
		}
		want = append(want, hdr.Name)
	}
	assertSameList(t, "tar -tf "+filepath.Base(mounted), got, want)
}

// checkDdCat reads a range of the large shard with dd and a small shard
// with cat, and compares with the source bytes.
func checkDdCat(t *testing.T, mnt string) {
	const mib = 1 << 20
	out, err := exec.Command("dd", "if="+filepath.Join(mnt, largeKey), "bs=1M", "skip=150", "count=3", "status=none").Output()
	if err != nil {
		t.Fatalf("dd: %v", err)
	}
	want := readRange(t, filepath.Join(e2e.data, largeKey), 150*mib, 3*mib)
	if !bytes.Equal(out, want) {
		t.Errorf("dd bs=1M skip=150 count=3 of %s: %d bytes differing from the source", largeKey, len(out))
	}
	small := e2e.smallShards()[3]
	out, err = exec.Command("cat", filepath.Join(mnt, small.key)).Output()
	if err != nil {
		t.Fatalf("cat: %v", err)
	}
	if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != small.sha256 {
		t.Errorf("cat %s: bytes differ from the source", small.key)
	}
}

func readRange(t *testing.T, path string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}

// assertSameList reports the entries only in got and only in want.
func assertSameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	inWant := map[string]bool{}
	for _, w := range want {
		inWant[w] = true
	}
	inGot := map[string]bool{}
	for _, g := range got {
		inGot[g] = true
		if !inWant[g] {
			t.Errorf("%s: unexpected %q", what, g)
		}
	}
	for _, w := range want {
		if !inGot[w] {
			t.Errorf("%s: missing %q", what, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
}

// TestInodesStableAcrossMounts: a key has the same inode number in every
// mount of the same listing, so tools that remember inodes (rsync, tar
// --listed-incremental, du across runs) see the same files.
func TestInodesStableAcrossMounts(t *testing.T) {
	t.Parallel()
	first, second := mountShardfs(t, e2e.source()), mountShardfs(t, e2e.source())
	for _, o := range e2e.objects {
		var a, b syscall.Stat_t
		if err := syscall.Stat(first.path(o.key), &a); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(second.path(o.key), &b); err != nil {
			t.Fatal(err)
		}
		if a.Ino != b.Ino {
			t.Errorf("%s: inode %d in one mount, %d in another", o.key, a.Ino, b.Ino)
		}
	}
}
