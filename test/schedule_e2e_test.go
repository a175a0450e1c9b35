//go:build e2e

package test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// tarBytes is the size of every .tar of the data set: what a map-style
// epoch reads.
func tarBytes() int64 {
	var n int64
	for _, o := range e2e.objects {
		if strings.HasSuffix(o.key, ".tar") {
			n += o.size
		}
	}
	return n
}

// buildMapIndex writes the map-style index of the data set to a file, on
// a mount of its own, so that the epochs measured after it fetch samples
// only.
func buildMapIndex(t *testing.T) string {
	t.Helper()
	index := filepath.Join(t.TempDir(), "index.json")
	m := mountShardfs(t, e2e.source())
	out, err := pythonCmd("-c", "import sys, shardfs; print(len(shardfs.TarIndexDataset(sys.argv[1], index_path=sys.argv[2])))", m.dir, index).CombinedOutput()
	if err != nil {
		t.Fatalf("building the map-style index: %v\n%s", err, out)
	}
	m.stop(t)
	return index
}

// TestScheduledMapEpochTwoRanks: a cold shuffled map-style epoch through a
// real mount, two ranks at once (DistributedSampler, num_replicas=2, one
// process each) with 2 and 4 DataLoader workers, each writing its sample
// schedule. Every sample of every shard is read and matches its recorded
// sha256, the schedule was used, no line of it was refused, and the store
// sent at most 1.05 x the data set. (TestLoaderEpochs runs the map-style
// epochs, schedule on, over kept pages.)
func TestScheduledMapEpochTwoRanks(t *testing.T) {
	t.Parallel()
	want := samplesPerShard(t)
	index := buildMapIndex(t)
	data := tarBytes()
	for _, workers := range []int{2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			// Direct I/O: every read reaches the mount, and the kernel
			// reads nothing ahead of a pread (its read-ahead over kept
			// pages fetches bytes past a sample that the schedule does
			// not name: 1.00-1.06x in this test).
			m := mountShardfs(t, e2e.source(), "--page-cache", "direct")
			results := make([]loaderResult, 2)
			outs := make([][]byte, 2)
			errs := make([]error, 2)
			argv := func(rank int) []string {
				return []string{"--dataset", "map", "--workers", strconv.Itoa(workers), "--index", index,
					"--rank", strconv.Itoa(rank), "--world-size", "2", "--seed", "15"}
			}
			var wg sync.WaitGroup
			for rank := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[rank], errs[rank] = checkEpochsCmd(m.dir, argv(rank)...).CombinedOutput()
				}()
			}
			wg.Wait()
			for rank := range 2 {
				results[rank] = parseCheckEpochs(t, outs[rank], errs[rank], argv(rank))
			}
			seen := map[string]int{}
			total := 0
			for rank, res := range results {
				e := res.Epochs[0]
				if e.BadCount > 0 || e.DuplicateCount > 0 || !res.OK {
					t.Errorf("rank %d: %d samples do not match their .json (%v), %d seen twice", rank, e.BadCount, e.Bad, e.DuplicateCount)
				}
				for shard, n := range e.PerShard {
					seen[shard] += n
					total += n
				}
			}
			// DistributedSampler pads the ranks to equal length with
			// samples from the start of the permutation.
			padding := (e2e.samples+1)/2*2 - e2e.samples
			if total != e2e.samples+padding {
				t.Errorf("the two ranks read %d samples, want %d (+%d padding)", total, e2e.samples, padding)
			}
			for shard, n := range want {
				if seen[shard] < n || seen[shard] > n+padding {
					t.Errorf("%q: the ranks read %d samples, want %d", shard, seen[shard], n)
				}
			}
			st := mountStats(t, m.dir)
			if store := st["store_bytes_total"]; store > 1.05*float64(data) {
				t.Errorf("the store sent %.0f bytes for an epoch over %d bytes of shards (%.2fx), want at most 1.05x", store, data, store/float64(data))
			}
			if st["hint_range_lines_total"] < float64(e2e.samples) || st["prefetch_schedule_parts_total"] == 0 || st["prefetch_schedule_read_total"] == 0 {
				t.Errorf("the schedule was not used: %v range lines, %v parts, %v ranges read from them",
					st["hint_range_lines_total"], st["prefetch_schedule_parts_total"], st["prefetch_schedule_read_total"])
			}
			for _, kind := range []string{"unknown", "past_eof", "huge", "garbage", "overlapping", "full"} {
				if n := st["hint_"+kind+"_lines_total"]; n != 0 {
					t.Errorf("hint_%s_lines_total %v for a loader's own schedule, want 0", kind, n)
				}
			}
			t.Logf("store bytes %.0f for %d bytes of shards (%.3fx); %v schedule parts, %v ranges read from them",
				st["store_bytes_total"], data, st["store_bytes_total"]/float64(data), st["prefetch_schedule_parts_total"], st["prefetch_schedule_read_total"])
		})
	}
}

// TestHostileScheduleLines: a schedule naming missing files, ranges past
// EOF, overlapping and huge ranges, garbage, and far more ranges than the
// queue holds: each kind counted, one warning per kind in the log, the
// daemon's memory bounded, and every byte read afterwards (the scheduled
// ranges first) equal to the source.
func TestHostileScheduleLines(t *testing.T) {
	t.Parallel()
	shards := e2e.smallShards()[:3]
	m := mountShardfs(t, e2e.source())
	a, b, c := shards[0], shards[1], shards[2]
	lines := []string{
		fmt.Sprintf("%s 0 100000", a.key),
		fmt.Sprintf("%s 50000 100000", a.key), // overlaps the previous
		fmt.Sprintf("%s 0 100000", a.key),     // inside the previous two
		fmt.Sprintf("no/such/shard.tar 0 %d", 4096),
		fmt.Sprintf("%s %d 4096", b.key, b.size-100), // past EOF: clipped
		fmt.Sprintf("%s %d 4096", b.key, b.size+1),   // starts past EOF
		fmt.Sprintf("%s 0 %d", c.key, int64(1)<<40),  // huge
		c.key + " ten 10",
		c.key + " 10 -10",
		"\x01\x02\x03 1 2",
		fmt.Sprintf("%s/%s 4096 8192", m.dir, c.key), // a good absolute one
	}
	// Two blocks apart in the large shard: no two coalesce, and nothing
	// reads them, so the parts keep them and the queue fills to its cap
	// of 65536. (A schedule over a shard small next to the budget keeps
	// no range: its parts go once the cache has them.)
	const flood = 70_000
	large := mustLookup(t, largeKey)
	var w bytes.Buffer
	for _, l := range lines {
		w.WriteString(l + "\n")
	}
	for i := range flood {
		fmt.Fprintf(&w, "%s %d 512\n", large.key, (int64(i)*2<<20)%(large.size-512))
	}
	hints := filepath.Join(m.dir, ".shardfs", "hints")
	if err := os.WriteFile(hints, w.Bytes(), 0o644); err != nil {
		t.Fatalf("writing the schedule: %v", err)
	}
	st := mountStats(t, m.dir)
	for kind, atLeast := range map[string]float64{"unknown": 1, "past_eof": 2, "huge": 1, "garbage": 3, "overlapping": 2, "full": 1} {
		if n := st["hint_"+kind+"_lines_total"]; n < atLeast {
			t.Errorf("hint_%s_lines_total %v, want at least %v", kind, n, atLeast)
		}
	}
	if q := st["prefetch_schedule_queued"]; q > 65536 {
		t.Errorf("%v ranges queued, more than the cap of 65536", q)
	}
	if pid := int(st["daemon_pid"]); pid > 0 {
		// --prefetch-memory 1 GiB; the schedule holds at most half of it
		// in parts, the RAM tier copies of what they fetched, and a queue
		// of 65536 ranges, some 6 MiB.
		switch rss := daemonRSS(t, pid); {
		case os.Getenv("SHARDFS_TEST_RACE") == "1":
			// A daemon built with -race keeps shadow memory several times
			// its heap: checked in the run without -race.
			t.Logf("daemon RSS %d MiB (built with -race: not checked)", rss>>20)
		case rss > 1<<30:
			t.Errorf("daemon RSS %d MiB after a 70,000-range schedule nobody reads: %s", rss>>20, rssDetail(pid))
		default:
			t.Logf("daemon RSS %d MiB after a 70,000-range schedule nobody reads", rss>>20)
		}
	}
	// Every kind of warning once, however many lines of it.
	logs := m.output.String()
	for _, text := range []string{"hints name no file", "past the end of their file", "longer than 256 MiB",
		"neither a path nor PATH OFFSET LENGTH", "overlap the previous range", "the schedule is full"} {
		if n := strings.Count(logs, text); n != 1 {
			t.Errorf("%d warnings containing %q, want 1", n, text)
		}
	}
	// The scheduled ranges, then the whole shards: the source's bytes.
	for _, r := range []struct {
		o        object
		off, len int64
	}{{a, 0, 150000}, {b, b.size - 100, 100}, {c, 4096, 8192}, {large, 2 << 20, 512}, {large, 0, 512}} {
		got := make([]byte, r.len)
		f, err := os.Open(filepath.Join(m.dir, r.o.key))
		if err != nil {
			t.Fatal(err)
		}
		n, err := f.ReadAt(got, r.off)
		f.Close()
		wantBytes := readLocal(t, r.o.key, r.off, r.len)
		if err != nil || !bytes.Equal(got[:n], wantBytes) {
			t.Errorf("%s [%d, +%d) through the mount: %d bytes, err %v, differ from the source", r.o.key, r.off, r.len, n, err)
		}
	}
	checkShards(t, m.dir, shards)
}

// readLocal is n bytes at off of the local copy of key.
func readLocal(t *testing.T, key string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(e2e.data, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && got != int(n) {
		t.Fatalf("local copy of %s at %d: %v", key, off, err)
	}
	return buf[:got]
}
