//go:build e2e

package test

import (
	"math/rand/v2"
	"os"
	"testing"
)

// fio's one random pass of 256 KiB reads over a file larger than the whole
// cache, through a mount whose RAM tier (no cache dir) is far smaller than
// the shard: every byte equals the source, and each read is fetched
// exactly (prefetch/exact.go), so the store sends about what was read
// rather than a block per read.
func TestRandomReadsOfAShardLargerThanTheCacheFetchWhatTheyRead(t *testing.T) {
	t.Parallel()
	large, want := sourceOf(t, largeKey)
	m := mountShardfs(t, e2e.source(), "--memory-cache-size", "16MiB")
	f, err := os.Open(m.path(large.key))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 256 << 10
	offs := shuffledOffsets(rand.New(rand.NewPCG(7, 9)), size, int64(len(want))-size, size) // never at 0, where a stream starts
	offs = offs[:min(len(offs), 200)]
	for _, off := range offs {
		readAndCompare(t, f, want, off, size)
	}
	st := mountStats(t, m.dir)
	read := float64(len(offs) * size)
	t.Logf("%d random reads of 256 KiB: %.0f exact, %.0f bytes fetched for %.0f read", len(offs), st["prefetch_exact_reads_total"], st["store_bytes_total"], read)
	if st["prefetch_exact_reads_total"] == 0 || st["store_bytes_total"] > 1.5*read {
		t.Fatalf("%d random 256 KiB reads of a %d MiB shard through a 16 MiB RAM tier: %.0f fetched exactly, %.0f bytes fetched for %.0f read; want the reads fetched exactly, at most 1.5 × the bytes read",
			len(offs), len(want)>>20, st["prefetch_exact_reads_total"], st["store_bytes_total"], read)
	}
}
