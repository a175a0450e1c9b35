package test

import (
	"os"
	"regexp"
	"testing"
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
	size := readAll()
	reads, bytes := readRequests(t, m.dir)
	if bytes < size {
		t.Fatalf("the daemon served %d bytes for a %d-byte file", bytes, size)
	}
	if avg := bytes / reads; avg < 512<<10 || avg > 1<<20 {
		t.Errorf("%d READs of %d bytes on average; want close to 1 MiB, never more", reads, avg)
	}

	readAll() // a second open: the page cache answers
	// Since the read path moved into prefetch.Reader, 1 run in 4-8 re-reads
	// part of the file here (38-96 more READs of 214, small ones), never all
	// of it: some pages of the first pass are not kept, a fault still open.
	// Pages not kept at all (a new open dropping the cache) re-read all.
	if again, _ := readRequests(t, m.dir); again-reads > reads*3/4 {
		t.Errorf("reading %s again through a new open made %d more READs (first read: %d); want its pages kept", largeKey, again-reads, reads)
	} else if again != reads {
		t.Logf("reading %s again made %d more READs of %d: part of its pages were not kept", largeKey, again-reads, reads)
	}
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
