//go:build e2e

package test

import (
	"io"
	"os"
	"regexp"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestKernelSettingsForStreaming checks, from the daemon's side, what the
// kernel does with the mount: READ requests of 1 MiB (the kernel's default
// is 128 KiB), a file's pages kept across opens, and names and attributes
// cached instead of looked up on every stat.
func TestKernelSettingsForStreaming(t *testing.T) {
	m := mountShardfs(t, e2e.data, "--debug-fuse")
	path := m.path(largeKey)

	for range 5 {
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
	}
	// The log reaches the test through a pipe: a LOOKUP of a name that does
	// not exist, once logged, means every request before it is too.
	if _, err := os.Stat(m.path("large/no-such-shard")); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing shard: %v", err)
	}
	if err := m.waitLogged(`"no-such-shard`, mountTimeout); err != nil {
		t.Fatal(err)
	}
	lookups := regexp.MustCompile(`LOOKUP n\d+ +\\?"shard-large\.tar\\?"`).FindAllString(m.output.String(), -1)
	if len(lookups) != 1 {
		t.Errorf("5 stats of %s made %d LOOKUPs, want 1 (entries cached for --attr-timeout)", largeKey, len(lookups))
	}

	readAll := func() int64 {
		sum, size, err := fileSHA256(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := mustLookup(t, largeKey); sum != want.sha256 {
			t.Fatalf("%s read through the mount differs from the source", largeKey)
		}
		return size
	}
	// Opened before the first pass so that looking at the page cache later
	// opens nothing: an open that dropped the cache would hide it.
	held, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	size := readAll()
	reads, bytes := readRequests(t, m.dir)
	if bytes < size {
		t.Fatalf("the daemon served %d bytes for a %d-byte file", bytes, size)
	}
	if avg := bytes / reads; avg < 512<<10 || avg > 1<<20 {
		t.Errorf("%d READs of %d bytes on average; want close to 1 MiB, never more", reads, avg)
	}

	// Pages kept across opens: the kernel drops a file's pages at an open
	// the daemon answers without FOPEN_KEEP_CACHE. This VM's host also
	// reclaims cold memory on its own (a DAMON "pageout" scheme: see
	// docs/TESTING.md), page cache included, so how many pages a later
	// read finds depends on how long the test took to get there. The
	// open's effect is therefore counted at the open: the file's first
	// keptSpan bytes, read again just now through the held descriptor, are
	// counted in the page cache right before a new open (and a read
	// through it) and right after.
	const keptSpan = 16 << 20
	if _, err := io.Copy(io.Discard, io.NewSectionReader(held, 0, keptSpan)); err != nil {
		t.Fatal(err)
	}
	pages := int64(keptSpan / os.Getpagesize())
	before := pages - missingPages(t, held, keptSpan)
	reopened, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if _, err := reopened.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	after := pages - missingPages(t, held, keptSpan)
	switch {
	case before < pages/2:
		t.Errorf("%d of the %d pages of %s just read are in the page cache; want them kept there", before, pages, largeKey)
	case after < before-before/8:
		t.Errorf("a new open of %s left %d of the %d pages in the page cache before it; want them kept across opens", largeKey, after, before)
	}
	readAll() // and every byte still right through a new open
	again, _ := readRequests(t, m.dir)
	t.Logf("a new open kept %d of %d pages; reading %s whole again made %d more READs (first read: %d)", after, before, largeKey, again-reads, reads)
}

// missingPages counts the pages of f (size bytes) that are not in the page
// cache, with mincore(2) on a mapping of it.
func missingPages(t *testing.T, f *os.File, size int64) int64 {
	t.Helper()
	path := f.Name()
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", path, err)
	}
	defer unix.Munmap(b)
	vec := make([]byte, (size+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore %s: %v", path, e)
	}
	var n int64
	for _, v := range vec {
		if v&1 == 0 {
			n++
		}
	}
	return n
}

// readRequests returns how many FUSE READs the mount answered and their
// bytes, from MNT/.shardfs/stats.
func readRequests(t *testing.T, mnt string) (n, bytes int64) {
	t.Helper()
	for _, s := range statSamples(t, mnt) {
		switch s.Name {
		case "shardfs_read_seconds":
			n += s.Count
		case "shardfs_read_bytes_total":
			bytes += int64(s.Value)
		}
	}
	if n == 0 {
		t.Fatal("the stats count no READ")
	}
	return n, bytes
}
