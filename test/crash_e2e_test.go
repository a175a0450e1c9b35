//go:build e2e

package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
	listingpkg "github.com/shardfs/shardfs/listing"
)

// tornWrite watches dir with inotify for the first file accepted by want
// that gets bytes written to it: a write under way (atomicfile writes a
// temporary file, renamed once whole, which gets no write after). The
// name arrives on the channel. The watch ends when the test does.
func tornWrite(t *testing.T, dir string, want func(name string) bool) <-chan string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	found := make(chan string, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name := string(bytes.TrimRight(raw, "\x00"))
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if name == ".stop" {
					return
				}
				if want(name) {
					select {
					case found <- name:
					default:
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		// A write of our own wakes the reader, which then returns.
		os.WriteFile(filepath.Join(dir, ".stop"), []byte{1}, 0o600)
		<-stopped
		os.Remove(filepath.Join(dir, ".stop"))
		unix.Close(fd)
	})
	return found
}

// killAtTornWrite runs cmd, kills it with SIGKILL as soon as torn names a
// write under way, and returns that file's name. It fails the test when
// cmd exits first or no write starts within timeout.
func killAtTornWrite(t *testing.T, cmd *exec.Cmd, out *lockedBuffer, torn <-chan string, timeout time.Duration) string {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	var name string
	select {
	case name = <-torn:
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	case <-exited:
		t.Fatalf("%s exited (%v) before the write it was to be killed in; output:\n%s", cmd.Path, cmd.ProcessState, out.String())
	case <-time.After(timeout):
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		t.Fatalf("no write started in %v; output:\n%s", timeout, out.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s ended by itself (%v), not by the kill; output:\n%s", cmd.Path, cmd.ProcessState, out.String())
	}
	return name
}

// writeManyFiles writes files n0..n0+n-1 of one byte under dir, a
// thousand to a directory.
func writeManyFiles(t *testing.T, dir string, n0, n int) {
	t.Helper()
	for i := n0; i < n0+n; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/1000))
		if i%1000 == 0 || i == n0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%06d", i)), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// persistedListing reads the one listing file in dir as a mount would
// check it: a header line, then as many object lines as it says. It
// returns the object count; a file that does not hold its whole count
// fails the test.
func persistedListing(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !atomicfile.IsTemp(e.Name()) {
			files = append(files, e.Name())
		}
	}
	if len(files) != 1 {
		t.Fatalf("%s holds listings %v; want one", dir, files)
	}
	f, err := os.Open(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var head struct {
		Objects int `json:"objects"`
	}
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &head) != nil {
		t.Fatalf("%s: no listing header", files[0])
	}
	lines := 0
	for sc.Scan() {
		lines++
	}
	if lines != head.Objects {
		t.Fatalf("%s is torn: %d objects, its header says %d", files[0], lines, head.Objects)
	}
	return lines
}

// countFiles counts the regular files under the mount (its side files
// left out).
func countFiles(t *testing.T, mnt string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(mnt, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".shardfs" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// killedMount runs `shardfs mount --foreground` of src on a fresh dir
// with flags and kills it with SIGKILL while it writes its persisted
// listing into cacheDir; the dead mount is detached. It returns the size
// the torn file had once the mount was dead.
func killedMount(t *testing.T, src, cacheDir string, flags ...string) int64 {
	t.Helper()
	listings := filepath.Join(cacheDir, listingpkg.Subdir)
	torn := tornWrite(t, listings, func(string) bool { return true }) // the listing alone is written there
	dir := t.TempDir()
	cmd := exec.Command(e2e.bin, append(append([]string{"mount", "--foreground", "--cache-dir", cacheDir}, flags...), src, dir)...)
	cmd.Env = e2e.env()
	out := &lockedBuffer{}
	name := killAtTornWrite(t, cmd, out, torn, mountTimeout)
	if isMounted(dir) {
		if b, err := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput(); err != nil {
			t.Fatalf("detach the killed mount: %v: %s", err, b)
		}
	}
	fi, err := os.Stat(filepath.Join(listings, name))
	if err != nil {
		t.Fatalf("the listing being written at the kill (%s) is gone: it was not killed mid-write (%v)", name, err)
	}
	return fi.Size()
}

// kill -9 of a mount while it persists its listing leaves the listing it
// was replacing, or none when there was none, never a torn one: the next
// mount takes a whole listing from the cache dir, or lists again, says
// nothing was unusable, and serves every object of the listing it took.
func TestCrashWhilePersistingTheListing(t *testing.T) {
	t.Parallel()
	// Enough objects that the listing takes many writes to persist: the
	// kill lands after the first.
	const first, added = 60000, 500
	src, cacheDir := t.TempDir(), t.TempDir()
	writeManyFiles(t, src, 0, first)
	if err := os.Mkdir(filepath.Join(cacheDir, listingpkg.Subdir), 0o700); err != nil {
		t.Fatal(err)
	}

	// No listing persisted before: after the kill there is none.
	size := killedMount(t, src, cacheDir)
	t.Logf("killed with %d bytes of the first listing written", size)
	if n := persistedListingCount(t, filepath.Join(cacheDir, listingpkg.Subdir)); n != -1 {
		t.Fatalf("a listing of %d objects persisted though the mount was killed while writing it", n)
	}
	m := mountShardfs(t, src, "--cache-dir", cacheDir)
	if n := countFiles(t, m.dir); n != first {
		t.Errorf("the mount after the kill shows %d files; want %d", n, first)
	}
	m.stop(t)
	if log := m.output.String(); strings.Contains(log, "unusable") {
		t.Errorf("the mount after the kill found an unusable listing:\n%s", log)
	}
	if n := persistedListing(t, filepath.Join(cacheDir, listingpkg.Subdir)); n != first {
		t.Fatalf("the listing persisted after the kill holds %d objects; want %d", n, first)
	}

	// A listing persisted before: a mount that lists again (the listing
	// is older than its TTL) is killed while replacing it.
	writeManyFiles(t, src, first, added)
	size = killedMount(t, src, cacheDir, "--metadata-ttl", "1ns")
	t.Logf("killed with %d bytes of the second listing written", size)
	kept := persistedListing(t, filepath.Join(cacheDir, listingpkg.Subdir))
	if kept != first && kept != first+added {
		t.Fatalf("after the kill the persisted listing holds %d objects; want the old %d or the new %d", kept, first, first+added)
	}
	m = mountShardfs(t, src, "--cache-dir", cacheDir)
	if n := countFiles(t, m.dir); n != kept {
		t.Errorf("the mount after the kill shows %d files; want the %d of the persisted listing", n, kept)
	}
	m.stop(t)
	log := m.output.String()
	if !strings.Contains(log, "listing taken from the cache dir") || !strings.Contains(log, fmt.Sprintf("objects=%d", kept)) {
		t.Errorf("the mount after the kill did not take the persisted listing of %d objects:\n%s", kept, log)
	}
	entries, _ := os.ReadDir(filepath.Join(cacheDir, listingpkg.Subdir))
	for _, e := range entries {
		if atomicfile.IsTemp(e.Name()) {
			t.Errorf("%s, left by the killed write, is still there after the next mount", e.Name())
		}
	}
}

// persistedListingCount is persistedListing's count, or -1 when dir
// holds no listing (a file being written is none).
func persistedListingCount(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !atomicfile.IsTemp(e.Name()) {
			return persistedListing(t, dir)
		}
	}
	return -1
}

// kill -9 of `shardfs warm` while it writes a whole-shard file leaves the
// files made before whole and nothing of the torn one: the next mount
// opens the whole-shard files it vouches for with none dropped, removes
// the torn write, and every shard reads back with the source's bytes.
func TestCrashWhileWritingAWholeShardFile(t *testing.T) {
	t.Parallel()
	src, cacheDir := t.TempDir(), t.TempDir()
	sizes := map[string]int{"a.tar": 24 << 20, "b.tar": 48<<20 + 5, "c.tar": 48 << 20}
	data := writeRandomFiles(t, src, sizes)
	cache := append(cacheFlags(cacheDir, "512MiB"), "--whole-shard-percent", "50")
	// a.tar whole before the crash.
	if r := mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", src, "--include", "a.tar"}, cache...)...); !strings.Contains(r.stdout, "1 held as whole files") {
		t.Fatalf("warm did not make a.tar whole: %s", r.stdout)
	}
	shards := filepath.Join(cacheDir, "shards")
	before, err := os.ReadDir(shards)
	if err != nil {
		t.Fatal(err)
	}

	// Any write but the journal's appends and its rewrite at open.
	torn := tornWrite(t, shards, func(name string) bool {
		return name != "journal" && !strings.HasPrefix(name, ".journal")
	})
	cmd := exec.Command(e2e.bin, append([]string{"warm", src, "--include", "[bc].tar", "--concurrency", "1"}, cache...)...)
	cmd.Env = e2e.env()
	name := killAtTornWrite(t, cmd, &lockedBuffer{}, torn, warmTimeout)
	fi, err := os.Stat(filepath.Join(shards, name))
	if err != nil {
		t.Fatalf("the whole-shard file being written at the kill (%s) is gone: not killed mid-write (%v)", name, err)
	}
	if fi.Size() >= int64(sizes["c.tar"]) {
		t.Fatalf("the file being written at the kill holds %d bytes, a whole shard: not torn", fi.Size())
	}
	t.Logf("warm killed with %d bytes of %s written", fi.Size(), name)

	m := mountShardfs(t, src, cache...)
	for key, want := range data {
		got, err := os.ReadFile(m.path(key))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s through the mount after the kill: %d bytes, %v; want the source's %d bytes", key, len(got), err, len(want))
		}
	}
	m.stop(t)
	log := m.output.String()
	var opened string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "whole-shard files opened") {
			opened = line
		}
	}
	if !strings.Contains(opened, "dropped=0") {
		t.Errorf("the mount after the kill dropped whole-shard files, or did not say: %q", opened)
	}
	after, err := os.ReadDir(shards)
	if err != nil {
		t.Fatal(err)
	}
	names := func(es []os.DirEntry) (out []string) {
		for _, e := range es {
			if !atomicfile.IsTemp(e.Name()) && e.Name() != "journal" {
				out = append(out, e.Name())
			}
		}
		return out
	}
	for _, e := range after {
		if atomicfile.IsTemp(e.Name()) {
			t.Errorf("%s, the killed write, is still in the shards dir after the next mount", e.Name())
		}
	}
	for _, n := range names(before) {
		if _, err := os.Stat(filepath.Join(shards, n)); err != nil {
			t.Errorf("whole-shard file %s, made before the kill, is gone after it: %v", n, err)
		}
	}
	t.Logf("whole-shard files before the kill %v, after the next mount %v; %s", names(before), names(after), opened)
}
