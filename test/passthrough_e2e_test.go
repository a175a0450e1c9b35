//go:build e2e

package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wholeCacheSize holds the data set twice: in the ring and as whole files.
const wholeCacheSize = "1GiB"

// warmWhole warms include (all of the data set when "") into a cache dir
// that holds every shard whole, and returns the dir and its flags.
func warmWhole(t *testing.T, dir, include string) []string {
	t.Helper()
	flags := cacheFlags(dir, wholeCacheSize)
	args := append([]string{"warm", e2e.source()}, append(e2e.endpoint(), flags...)...)
	if include != "" {
		args = append(args, "--include", include)
	}
	r := mustRun(t, e2e.env(), warmTimeout, args...)
	if !strings.Contains(r.stdout, "held as whole files") {
		t.Fatalf("warm did not report whole files:\n%s", r.stdout)
	}
	return flags
}

// nonEmpty is the data set without its empty object (nothing to keep whole).
func nonEmpty(objs []object) []object {
	var out []object
	for _, o := range objs {
		if o.size > 0 {
			out = append(out, o)
		}
	}
	return out
}

// wholeFileOf returns the path of the whole-shard file in cacheDir that
// holds o's bytes.
func wholeFileOf(t *testing.T, cacheDir string, o object) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(cacheDir, "shards"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		path := filepath.Join(cacheDir, "shards", e.Name())
		if sum, n, err := fileSHA256(path); err == nil && n == o.size && sum == o.sha256 {
			return path
		}
	}
	t.Fatalf("no whole-shard file in %s holds %s", cacheDir, o.key)
	return ""
}

// Warm, then read every shard through the mount: with passthrough every
// byte equals the source and the daemon serves none of them (the kernel
// reads the whole-shard files); with --passthrough off the same bytes
// come from the daemon.
func TestPassthroughServesWarmedShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flags := warmWhole(t, dir, "")
	whole := nonEmpty(e2e.objects)

	m := mountShardfs(t, e2e.source(), flags...)
	hintAll(t, m.dir) // as a loader does: nothing is read ahead for shards passed through
	checkShards(t, m.dir, e2e.objects)
	st := mountStats(t, m.dir)
	t.Logf("passthrough auto: passthrough=%v, %v opens passed through, %v served by the daemon, %v bytes read through the daemon, %v read from the ring",
		st["passthrough"], st["passthrough_opens_total"], st["daemon_opens_total"], st["read_bytes_total"], st["cache_ring_read_bytes_total"])
	if st["passthrough"] != 1 || st["passthrough_opens_total"] < float64(len(whole)) || st["read_bytes_total"] != 0 || st["cache_ring_read_bytes_total"] != 0 {
		t.Errorf("passthrough %v, %v opens passed through, %v bytes read through the daemon, %v from the ring; want 1, at least %d (every shard held whole), 0, 0",
			st["passthrough"], st["passthrough_opens_total"], st["read_bytes_total"], st["cache_ring_read_bytes_total"], len(whole))
	}
	if n := strings.Count(m.output.String(), "passthrough on"); n != 1 {
		t.Errorf("the mount said %d times that passthrough is on, want once:\n%s", n, m.output.String())
	}
	m.stop(t)

	m = mountShardfs(t, e2e.source(), append(flags, "--passthrough", "off")...)
	hintAll(t, m.dir)
	checkShards(t, m.dir, e2e.objects)
	st = mountStats(t, m.dir)
	var total int64
	for _, o := range e2e.objects {
		total += o.size
	}
	if st["passthrough"] != 0 || st["passthrough_opens_total"] != 0 || st["read_bytes_total"] < float64(total) {
		t.Errorf("--passthrough off: passthrough %v, %v opens passed through, %v bytes read through the daemon; want 0, 0, at least %d",
			st["passthrough"], st["passthrough_opens_total"], st["read_bytes_total"], total)
	}
}

// hintAll writes every shard of the data set to the mount's hints file.
func hintAll(t *testing.T, mnt string) {
	t.Helper()
	var lines strings.Builder
	for _, o := range e2e.objects {
		lines.WriteString(o.key + "\n")
	}
	if err := os.WriteFile(filepath.Join(mnt, ".shardfs", "hints"), []byte(lines.String()), 0); err != nil {
		t.Fatal(err)
	}
}

// readAllAt reads f from off to its end.
func readAllAt(t *testing.T, f *os.File, off int64) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
	if err != nil {
		t.Fatalf("read %s from %d: %v", f.Name(), off, err)
	}
	return b
}

// waitReleased waits until the daemon has released every open shard (a
// close reaches it after close(2) returns) and returns the stats; past
// unmountTimeout, a bound on a handle never released, it returns them as
// they are.
func waitReleased(t *testing.T, mnt string) map[string]float64 {
	t.Helper()
	for deadline := time.Now().Add(unmountTimeout); ; time.Sleep(10 * time.Millisecond) {
		st := mountStats(t, mnt)
		if st["open_shards"] == 0 || time.Now().After(deadline) {
			return st
		}
	}
}

// A shard's whole file removed (as eviction does: it only unlinks) while a
// passed-through handle is open: that handle, and a second open beside it,
// keep reading the shard's bytes; once both are closed a new open is
// served by the daemon, with the same bytes.
func TestPassthroughHandleOutlivesEviction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var large object
	for _, o := range e2e.objects {
		if o.size > large.size {
			large = o
		}
	}
	flags := warmWhole(t, dir, large.key)
	src, err := os.ReadFile(filepath.Join(e2e.data, large.key))
	if err != nil {
		t.Fatal(err)
	}
	m := mountShardfs(t, e2e.source(), flags...)
	first, err := os.Open(m.path(large.key))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	half := large.size / 2
	head := make([]byte, half)
	if _, err := io.ReadFull(first, head); err != nil || !bytes.Equal(head, src[:half]) {
		t.Fatalf("first half of %s through the mount: %v, equal %v", large.key, err, bytes.Equal(head, src[:half]))
	}
	if err := os.Remove(wholeFileOf(t, dir, large)); err != nil {
		t.Fatal(err)
	}
	if got := readAllAt(t, first, half); !bytes.Equal(got, src[half:]) {
		t.Errorf("the handle opened before the file was removed read %d bytes after it, not the shard's %d", len(got), len(src[half:]))
	}
	second, err := os.Open(m.path(large.key))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllAt(t, second, 0); !bytes.Equal(got, src) {
		t.Errorf("a second open beside it read %d bytes, not the shard's", len(got))
	}
	second.Close()
	first.Close()
	st := waitReleased(t, m.dir)
	if st["passthrough_opens_total"] != 2 || st["read_bytes_total"] != 0 {
		t.Errorf("%v opens passed through, %v bytes read through the daemon; want 2 and 0", st["passthrough_opens_total"], st["read_bytes_total"])
	}
	checkShards(t, m.dir, []object{large})
	st = mountStats(t, m.dir)
	if st["daemon_opens_total"] != 1 || st["read_bytes_total"] < float64(large.size) {
		t.Errorf("after its file was removed: %v opens served by the daemon, %v bytes; want 1 and the shard's %d", st["daemon_opens_total"], st["read_bytes_total"], large.size)
	}
}

// A cache dir on overlayfs cannot back a passed-through file (the kernel
// refuses the stacking): the mount says so once and serves every byte
// itself.
func TestPassthroughRefusedServesThroughTheDaemon(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	lower, upper, work, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	for _, d := range []string{lower, upper, work, merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		t.Fatalf("mount an overlayfs for the cache dir: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	dir := filepath.Join(merged, "cache")
	shards := e2e.smallShards()[:4]
	flags := warmWhole(t, dir, "shard-00000[0-3].tar")

	m := mountShardfs(t, e2e.source(), flags...)
	checkShards(t, m.dir, shards)
	checkShards(t, m.dir, shards)
	out := m.output.String()
	st := mountStats(t, m.dir)
	t.Logf("overlayfs cache dir: passthrough=%v, %v opens passed through, %v served by the daemon", st["passthrough"], st["passthrough_opens_total"], st["daemon_opens_total"])
	if n := strings.Count(out, "passthrough refused"); n != 1 {
		t.Errorf("the mount said %d times that passthrough was refused, want once:\n%s", n, out)
	}
	if st["passthrough"] != 0 || st["passthrough_opens_total"] != 0 || st["daemon_opens_total"] < float64(2*len(shards)) {
		t.Errorf("passthrough %v, %v opens passed through, %v by the daemon; want 0, 0, %d", st["passthrough"], st["passthrough_opens_total"], st["daemon_opens_total"], 2*len(shards))
	}
}

// A bit flipped in a complete whole-shard file: cache verify names its
// shard, exits 1 and deletes the file; the mount then serves the shard's
// right bytes through the daemon, and the others still through the kernel.
func TestCacheVerifyDropsAFlippedWholeFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shards := e2e.smallShards()[:3]
	flags := warmWhole(t, dir, "shard-00000[0-2].tar")
	bad := shards[1]
	path := wholeFileOf(t, dir, bad)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, bad.size/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := f.WriteAt(b, bad.size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := runShardfs(e2e.env(), warmTimeout, "cache", "verify", "--cache-dir", dir)
	t.Logf("cache verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stdout, "bad whole-shard file") || !strings.Contains(r.stdout, bad.key) ||
		!strings.Contains(r.stdout, "3 whole-shard files checked, 2 good, 1 bad") {
		t.Errorf("cache verify: exit %d; want 1, naming %s as a bad whole-shard file", r.code, bad.key)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the bad file %s is still there: %v", path, err)
	}

	m := mountShardfs(t, e2e.source(), flags...)
	checkShards(t, m.dir, shards)
	st := mountStats(t, m.dir)
	if st["passthrough_opens_total"] != 2 || st["daemon_opens_total"] != 1 {
		t.Errorf("%v opens passed through, %v served by the daemon; want 2 (the good files) and 1 (%s)", st["passthrough_opens_total"], st["daemon_opens_total"], bad.key)
	}
}

// A mount with a cache dir reads every shard whole once; each becomes a
// whole-shard file in the background, and the next open of it, page cache
// dropped, is passed through to the kernel, as after `shardfs warm`:
// every byte right, none of them read through the daemon.
func TestShardReadWholeIsPassedThroughNextOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := mountShardfs(t, e2e.source(), cacheFlags(dir, wholeCacheSize)...)
	// The first read of a shard is answered into the reader's buffer, not
	// into pages of the mount's own: beside whole-shard files the page
	// cache --page-cache auto uses is the file's, from the next open on.
	large, _ := lookup(e2e.objects, largeKey)
	if pages := pagesKeptAfterReading(t, m.path(largeKey), large); pages != 0 {
		t.Errorf("%s: %d pages in the mount's page cache after a first read through the daemon, want 0 (read directly beside whole-shard files)", largeKey, pages)
	}
	checkShards(t, m.dir, e2e.objects)
	whole := nonEmpty(e2e.objects)
	waitStat(t, m.dir, "cache_whole_files", float64(len(whole)))
	// The large shard, read in order from its first byte, was written to
	// its file as it was read, not copied from the ring after.
	if st := mountStats(t, m.dir); st["cache_whole_as_read_total"] < 1 {
		t.Errorf("%v whole-shard files written as their shards were read, want at least 1 (%s)", st["cache_whole_as_read_total"], largeKey)
	}
	for _, o := range e2e.objects {
		dropPageCache(t, m.path(o.key))
	}
	before := mountStats(t, m.dir)
	checkShards(t, m.dir, e2e.objects)
	after := mountStats(t, m.dir)
	opens, read := after["passthrough_opens_total"]-before["passthrough_opens_total"], after["read_bytes_total"]-before["read_bytes_total"]
	t.Logf("second pass: %v opens passed through, %v bytes read through the daemon", opens, read)
	if opens < float64(len(whole)) || read != 0 {
		t.Errorf("second pass: %v opens passed through, %v bytes read through the daemon; want %d (every shard read whole before) and 0", opens, read, len(whole))
	}
}

// pagesKeptAfterReading reads path whole through one descriptor, checks
// its bytes against o, and returns how many of its pages the kernel then
// holds for the mount's inode (mincore through a mapping of that same
// descriptor, which faults nothing in).
func pagesKeptAfterReading(t *testing.T, path string, o object) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil || n != o.size || hex.EncodeToString(h.Sum(nil)) != o.sha256 {
		t.Fatalf("%s: read %d bytes, sha256 %x, err %v; want %d bytes %s", path, n, h.Sum(nil), err, o.size, o.sha256)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", path, err)
	}
	defer unix.Munmap(mem)
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore %s: %v", path, errno)
	}
	kept := 0
	for _, v := range vec {
		kept += int(v & 1)
	}
	return kept
}
