//go:build e2e

package test

import (
	"math/rand/v2"
	"os"
	"testing"
)

// Random 256 KiB reads of a shard larger than the whole cache, through a
// mount whose RAM tier (no cache dir) is far smaller than the shard
// (prefetch/exact.go). A reader that looks up one record in each of many
// chunks is fetched exactly what it reads; fio's one random pass over the
// whole file fetches the rest of a chunk once a second read lands there
// and hands it to the page cache. Every byte equals the source.
func TestRandomReadsOfAShardLargerThanTheCache(t *testing.T) {
	t.Parallel()
	large, want := sourceOf(t, largeKey)
	const size, chunk = 256 << 10, 8 << 20 // the read, the default --part-size

	t.Run("one read per chunk is fetched exactly", func(t *testing.T) {
		m := mountShardfs(t, e2e.source(), "--memory-cache-size", "16MiB")
		f, err := os.Open(m.path(large.key))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rng := rand.New(rand.NewPCG(7, 9))
		var offs []int64
		for c := int64(1); (c+1)*chunk <= int64(len(want)); c++ { // not chunk 0, where a stream starts
			offs = append(offs, c*chunk+rng.Int64N(chunk/size)*size)
		}
		rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
		for _, off := range offs {
			readAndCompare(t, f, want, off, size)
		}
		st := mountStats(t, m.dir)
		read := float64(len(offs) * size)
		t.Logf("%d reads of 256 KiB, one per chunk: %.0f exact, %.0f chunk parts, %.0f bytes fetched for %.0f read", len(offs), st["prefetch_exact_reads_total"], st["prefetch_chunk_reads_total"], st["store_bytes_total"], read)
		if st["prefetch_exact_reads_total"] != float64(len(offs)) || st["prefetch_chunk_reads_total"] != 0 || st["store_bytes_total"] > 1.05*read {
			t.Fatalf("%d random 256 KiB reads, one in each chunk of a %d MiB shard, through a 16 MiB RAM tier: %.0f fetched exactly, %.0f chunk parts, %.0f bytes fetched for %.0f read; want every read exact, no chunk, at most 1.05 × the bytes read",
				len(offs), len(want)>>20, st["prefetch_exact_reads_total"], st["prefetch_chunk_reads_total"], st["store_bytes_total"], read)
		}
	})

	t.Run("a random pass fetches chunks for the page cache", func(t *testing.T) {
		m := mountShardfs(t, e2e.source(), "--memory-cache-size", "16MiB")
		f, err := os.Open(m.path(large.key))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		end := int64(len(want)) / size * size
		offs := shuffledOffsets(rand.New(rand.NewPCG(3, 5)), size, end, size) // never at 0, where a stream starts
		for _, off := range offs {
			readAndCompare(t, f, want, off, size)
		}
		st := mountStats(t, m.dir)
		total := float64(end - size)
		t.Logf("%d reads of 256 KiB over %d MiB: %.0f exact, %.0f chunk parts, %.0f blocks handed to the page cache (%.0f dropped, %.0f failed), %.0f bytes fetched", len(offs), len(want)>>20, st["prefetch_exact_reads_total"], st["prefetch_chunk_reads_total"], st["page_cache_fills_total"], st["page_cache_fills_dropped_total"], st["page_cache_fills_failed_total"], st["store_bytes_total"])
		// The bound leaves room for reads that reach the daemon before
		// their block's fill (each fetched again, exactly) on a slow box;
		// the unit tests hold the engine to its tighter one.
		if st["prefetch_chunk_reads_total"] == 0 || st["page_cache_fills_total"] == 0 || st["store_bytes_total"] > 1.5*total {
			t.Fatalf("a random pass of %d reads of 256 KiB over a %d MiB shard through a 16 MiB RAM tier: %.0f chunk parts, %.0f blocks handed to the page cache, %.0f bytes fetched for %.0f read; want chunks fetched and handed over, at most 1.5 × the bytes read",
				len(offs), len(want)>>20, st["prefetch_chunk_reads_total"], st["page_cache_fills_total"], st["store_bytes_total"], total)
		}
	})
}
