//go:build e2e

package test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Shuffled 4 KiB preads, as fio --rw=randread or a map-style Dataset makes
// them: every byte equals the source, and once a read has landed in a
// block the cache holds, the mount hands the whole block to the kernel's
// page cache (fs/pagefill.go), so that the block's other reads are
// answered by the kernel and never reach the daemon. Under --page-cache
// direct the kernel keeps no pages: nothing is handed over, and every
// read still comes out right.
//
// How many reads reach the daemon before a block is handed over depends
// on how soon the block is whole in the cache and how soon the filler
// gets to it, so the test does not count those. A first pass fills the
// cache; once its handle is released, the kernel's pages of the object
// are dropped, and each
// block is read in a shuffled order: one read, then a wait for the
// filler's answer (a read of a block the filler could not lend yet
// offers it again), then the block's other reads, of which none should
// reach the daemon.
func TestShuffledSmallReadsAreServedFromFilledPages(t *testing.T) {
	t.Parallel()
	large, want := sourceOf(t, largeKey)
	const span, size, bs = 48 << 20, 4096, 1 << 20 // the first 48 blocks: a dense pass over them
	for _, tc := range []struct {
		name      string
		flags     []string
		wantFills bool
	}{
		// Beside whole-shard files --page-cache auto reads directly: the
		// pages are asked for.
		{"pages-kept", []string{"--page-cache", "keep"}, true},
		{"direct-io", []string{"--page-cache", "direct"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := append(cacheFlags(t.TempDir(), "1GiB"), tc.flags...)
			m := mountShardfs(t, e2e.source(), flags...)
			path := m.path(large.key)
			reads := shuffledPass(t, path, want, span, size)
			if !tc.wantFills {
				if fills := mountStats(t, m.dir)["page_cache_fills_total"]; fills != 0 {
					t.Fatalf("under --page-cache direct %.0f blocks were handed to the page cache after %d reads; the kernel keeps no pages there", fills, reads)
				}
				return
			}
			// The first pass's handle released: an inode's blocks are
			// handed over once while it has open handles, and the kernel
			// reports a close after close(2) has returned.
			if st := waitReleased(t, m.dir); st["open_shards"] != 0 {
				t.Fatalf("the first pass's handle of %s is still open in the daemon (%v open shards)", path, st["open_shards"])
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
				t.Fatalf("dropping the kernel's pages of %s: %v", path, err)
			}
			var after, other int64 // reads after a block was handed over, and of those, reads that reached the daemon
			rng := rand.New(rand.NewPCG(3, 4))
			for _, b := range rng.Perm(int(min(span, int64(len(want))) / bs)) {
				offs := shuffledOffsets(rng, int64(b)*bs, min(int64(b+1)*bs, int64(len(want))), size)
				n := readUntilFilled(t, m.dir, f, want, offs, size)
				before := daemonReads(t, m.dir)
				for _, off := range offs[n:] {
					readAndCompare(t, f, want, off, size)
				}
				after += int64(len(offs) - n)
				other += daemonReads(t, m.dir) - before
			}
			t.Logf("%d reads after their block was handed to the page cache; %d reached the daemon", after, other)
			if other > after/4 {
				t.Fatalf("%d of %d 4 KiB reads of blocks already handed to the page cache reached the daemon; want at most a quarter", other, after)
			}
		})
	}
}

// readUntilFilled reads offs in order until the filler has handed the
// block they lie in to the page cache, and returns how many it read. A
// read answered by the kernel offers nothing; nor does a READ that queues
// no fill (one the kernel made larger than a small read, say). A read
// the daemon answers that queues the block for the filler (the queued
// count grows before the reply) ends with the block handed over or, when
// the cache does not hold it whole yet, failed, and waiting for another
// read.
func readUntilFilled(t *testing.T, mnt string, f *os.File, want []byte, offs []int64, size int64) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i, off := range offs {
		st := mountStats(t, mnt)
		filled, failed, queued, reached := st["page_cache_fills_total"], st["page_cache_fills_failed_total"], st["page_cache_fills_queued_total"], daemonReads(t, mnt)
		readAndCompare(t, f, want, off, size)
		if daemonReads(t, mnt) == reached || mountStats(t, mnt)["page_cache_fills_queued_total"] == queued {
			continue // the kernel had this page, or its READ offered no fill
		}
		for {
			st := mountStats(t, mnt)
			if st["page_cache_fills_total"] > filled {
				return i + 1
			}
			if st["page_cache_fills_failed_total"] > failed {
				break // offer the block again with the next read
			}
			if time.Now().After(deadline) {
				t.Fatalf("a 4 KiB read at %d reached the daemon and the block holding it was neither handed to the page cache nor failed within a minute (%.0f dropped)", off, st["page_cache_fills_dropped_total"])
			}
			time.Sleep(5 * time.Millisecond) // poll interval while the filler works
		}
	}
	t.Fatalf("no read of the %d in the block at %d got it handed to the page cache", len(offs), offs[0]/(1<<20)<<20)
	return 0
}

// sourceOf returns the object key names and its bytes in the source.
func sourceOf(t *testing.T, key string) (object, []byte) {
	t.Helper()
	o, ok := lookup(e2e.objects, key)
	if !ok {
		t.Fatalf("%s is not in the data set", key)
	}
	data, err := os.ReadFile(filepath.Join(e2e.data, filepath.FromSlash(o.key)))
	if err != nil {
		t.Fatal(err)
	}
	return o, data
}

// daemonReads is the number of READs the daemon has answered.
func daemonReads(t *testing.T, mnt string) (n int64) {
	t.Helper()
	for _, s := range statSamples(t, mnt) {
		if s.Name == "shardfs_read_seconds" {
			n += s.Count
		}
	}
	return n
}

// shuffledOffsets returns the size-aligned offsets of [start, end) in a
// shuffled order.
func shuffledOffsets(rng *rand.Rand, start, end, size int64) []int64 {
	offs := make([]int64, 0, (end-start)/size)
	for off := start; off < end; off += size {
		offs = append(offs, off)
	}
	rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	return offs
}

// shuffledPass preads [0, span) of path in size-byte reads in a shuffled
// order, compares each with the same bytes of want, and returns the count.
func shuffledPass(t *testing.T, path string, want []byte, span, size int64) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	offs := shuffledOffsets(rand.New(rand.NewPCG(1, 2)), 0, min(span, int64(len(want))), size)
	for _, off := range offs {
		readAndCompare(t, f, want, off, size)
	}
	return len(offs)
}

func readAndCompare(t *testing.T, f *os.File, want []byte, off, size int64) {
	t.Helper()
	got := make([]byte, size)
	end := min(off+size, int64(len(want)))
	n, err := f.ReadAt(got[:end-off], off)
	if err != nil || !bytes.Equal(got[:n], want[off:end]) {
		t.Fatalf("%s at %d: %d bytes, err %v; not the source's bytes", f.Name(), off, n, err)
	}
}
