//go:build e2e

package test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	shardfs "github.com/shardfs/shardfs/fs"
)

// TestFillCacheIoctlMakesAHandleAFiller: the ioctl `shardfs warm` sends
// on each shard it reads through a mount reaches the read path, which
// counts the handle as filling the cache (no block fetched while it is
// open skips the ring) until it is closed; and a warm through the mount
// leaves every block it read in the ring.
func TestFillCacheIoctlMakesAHandleAFiller(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cache := append(cacheFlags(dir, "64MiB"), "--whole-shard-percent", "0")
	m := mountWith(t, e2e.env(), e2e.minio.url, e2e.source(), cache...)
	shards := e2e.smallShards()[:3]

	f, err := os.Open(filepath.Join(m.dir, shards[0].key))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetInt(int(f.Fd()), uint(shardfs.CmdFillCache), 0); err != nil {
		t.Fatalf("the fill-cache ioctl on %s: %v", shards[0].key, err)
	}
	if got := mountStats(t, m.dir)["prefetch_cache_fillers"]; got != 1 {
		t.Errorf("cache fillers with one handle marked: %v, want 1", got)
	}
	f.Close()
	// The kernel releases a handle after close returns: wait for it, with
	// unmountTimeout only as a bound on a handle never released.
	deadline := time.Now().Add(unmountTimeout)
	for got := mountStats(t, m.dir)["prefetch_cache_fillers"]; got != 0; got = mountStats(t, m.dir)["prefetch_cache_fillers"] {
		if time.Now().After(deadline) {
			t.Fatalf("cache fillers %v %v after the marked handle closed, want 0", got, unmountTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}

	var want int64
	for _, o := range shards {
		want += o.size
	}
	r := mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", e2e.source(), "--include", "shard-00000[0-2].tar"}, append(e2e.endpoint(), cache...)...)...)
	// The mount writes a block into the ring after the read that fetched
	// it has been answered, so the warm can exit before its last blocks
	// are written: wait for them (whether a block skips the ring is
	// decided, and counted, before its read is answered).
	st := mountStats(t, m.dir)
	for deadline := time.Now().Add(refreshTimeout); int64(st["cache_ring_bytes"]) < want && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		st = mountStats(t, m.dir)
	}
	if got := st["prefetch_cache_skipped_bytes_total"]; got != 0 {
		t.Errorf("%v bytes skipped the ring during a warm through the mount, want 0\n%s", got, r.stderr)
	}
	if got := int64(st["cache_ring_bytes"]); got < want {
		t.Errorf("the ring holds %d bytes after warming %d through the mount\n%s", got, want, r.stderr)
	}
	checkShards(t, m.dir, shards)
}
