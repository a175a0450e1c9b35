package test

import (
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

	// This VM's host reclaims cold memory on its own (a DAMON "pageout"
	// scheme: /sys/kernel/mm/damon/admin), page cache included: pages read
	// once and left alone for a few seconds can go. Only those may be read
	// again; a new open that dropped the cache would read every page again.
	missing := missingPages(t, held, size)
	readAll() // a second open: the page cache answers
	again, _ := readRequests(t, m.dir)
	if slack := reads / 8; again-reads > missing+slack {
		t.Errorf("reading %s again through a new open made %d more READs (first read: %d; pages missing from the page cache before it: %d); want its pages kept", largeKey, again-reads, reads, missing)
	} else if again != reads {
		t.Logf("reading %s again made %d more READs of %d; %d pages had left the page cache before it", largeKey, again-reads, reads, missing)
	}
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
