//go:build e2e

package test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"syscall"
	"testing"
	"time"
)

// With --page-cache direct every read reaches the daemon and is answered
// into the reader's buffer; the bytes must be the same as through pages,
// and a reader that maps a shard still can.
func TestDirectIOServesEveryByte(t *testing.T) {
	t.Parallel()
	for name, source := range sources() {
		t.Run(name, func(t *testing.T) {
			m := mountShardfs(t, source, "--page-cache", "direct")
			if err := m.waitLogged("policy=direct", 5*time.Second); err != nil {
				t.Fatalf("the mount did not log its page cache policy: %v", err)
			}
			large, _ := lookup(e2e.objects, largeKey)
			shards := e2e.smallShards()[:6]
			objs := append([]object{large, large}, shards...)
			chunks := []int{1 << 20, 100_000, 4096, 1 << 20, 65536, 12345, 777, 3 << 20}
			readConcurrently(t, m, objs, chunks)
			// A second pass reads through the daemon again, not from pages.
			readConcurrently(t, m, objs[:2], chunks[:2])
			checkMapped(t, m.path(shards[0].key), shards[0])
		})
	}
}

// checkMapped maps path read-only and checks its bytes against o.
func checkMapped(t *testing.T, path string, o object) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := syscall.Mmap(int(f.Fd()), 0, int(o.size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", path, err)
	}
	defer syscall.Munmap(data)
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != o.sha256 {
		t.Fatalf("mmap of %s: sha256 %s, want %s", path, got, o.sha256)
	}
}
