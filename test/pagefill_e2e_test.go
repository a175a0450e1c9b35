//go:build e2e

package test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// A shuffled pass of 4 KiB preads, as fio --rw=randread or a map-style
// Dataset makes them: every byte equals the source, and once a read has
// landed in a block the cache holds, the mount hands the whole block to
// the kernel's page cache (fs/pagefill.go), so the block's other reads are
// answered by the kernel and most reads never reach the daemon. Under
// --page-cache direct the kernel keeps no pages: nothing is handed over,
// and every read still comes out right.
func TestShuffledSmallReadsAreServedFromFilledPages(t *testing.T) {
	t.Parallel()
	large, _ := lookup(e2e.objects, largeKey)
	src := filepath.Join(e2e.data, filepath.FromSlash(large.key))
	const span, size = 48 << 20, 4096 // the first 48 blocks: a dense pass over them
	for _, tc := range []struct {
		name      string
		flags     []string
		wantFills bool
	}{
		{"pages-kept", nil, true},
		{"direct-io", []string{"--page-cache", "direct"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := append(cacheFlags(t.TempDir(), "1GiB"), tc.flags...)
			m := mountShardfs(t, e2e.source(), flags...)
			reads := shuffledPass(t, m.path(large.key), src, span, size)

			var daemonReads int64
			for _, s := range statSamples(t, m.dir) {
				if s.Name == "shardfs_read_seconds" {
					daemonReads += s.Count
				}
			}
			fills := mountStats(t, m.dir)["page_cache_fills_total"]
			t.Logf("%d reads: %d reached the daemon, %.0f blocks filled", reads, daemonReads, fills)
			switch {
			case tc.wantFills && (fills == 0 || daemonReads > int64(reads/4)):
				t.Fatalf("%d of %d shuffled 4 KiB reads reached the daemon and %.0f blocks were handed to the page cache; want fills, and at most a quarter of the reads", daemonReads, reads, fills)
			case !tc.wantFills && fills != 0:
				t.Fatalf("under --page-cache direct %.0f blocks were handed to the page cache; the kernel keeps no pages there", fills)
			}
		})
	}
}

// shuffledPass preads [0, span) of path in size-byte reads in a shuffled
// order, compares each with the same bytes of src, and returns the count.
func shuffledPass(t *testing.T, path, src string, span, size int64) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	offs := make([]int64, 0, span/size)
	for off := int64(0); off < span && off < int64(len(want)); off += size {
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	got := make([]byte, size)
	for _, off := range offs {
		end := min(off+size, int64(len(want)))
		n, err := f.ReadAt(got[:end-off], off)
		if err != nil || !bytes.Equal(got[:n], want[off:end]) {
			t.Fatalf("%s at %d: %d bytes, err %v; not the source's bytes", path, off, n, err)
		}
	}
	return len(offs)
}
