//go:build e2e

package test

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// epochResult is one epoch as examples/check_epochs.py reports it.
type epochResult struct {
	Epoch          int            `json:"epoch"`
	Samples        int            `json:"samples"`
	PerShard       map[string]int `json:"per_shard"`
	Duplicates     []string       `json:"duplicates"`
	DuplicateCount int            `json:"duplicate_count"`
	Bad            []string       `json:"bad"`
	BadCount       int            `json:"bad_count"`
	SamplesPerSec  float64        `json:"samples_per_second"`
}

// loaderResult is the RESULT line of examples/check_epochs.py.
type loaderResult struct {
	Dataset string        `json:"dataset"`
	Workers int           `json:"workers"`
	Epochs  []epochResult `json:"epochs"`
	OK      bool          `json:"ok"`
}

// samplesPerShard counts the samples (distinct member keys) of every .tar
// of the local copy of the data set, read with Go's archive/tar: an oracle
// independent of the Python code and of the mount.
func samplesPerShard(t *testing.T) map[string]int {
	t.Helper()
	want := map[string]int{}
	for _, o := range e2e.objects {
		if !strings.HasSuffix(o.key, ".tar") {
			continue
		}
		f, err := os.Open(filepath.Join(e2e.data, filepath.FromSlash(o.key)))
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		tr := tar.NewReader(f)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", o.key, err)
			}
			base := path.Base(hdr.Name)
			stem, _, _ := strings.Cut(base, ".")
			keys[path.Join(path.Dir(hdr.Name), stem)] = true
		}
		f.Close()
		want[o.key] = len(keys)
	}
	return want
}

// runCheckEpochs runs examples/check_epochs.py on dir and returns its RESULT.
func runCheckEpochs(t *testing.T, dir string, args ...string) loaderResult {
	t.Helper()
	out, err := checkEpochsCmd(dir, args...).CombinedOutput()
	return parseCheckEpochs(t, out, err, args)
}

// checkEpochsCmd is examples/check_epochs.py on dir with args.
func checkEpochsCmd(dir string, args ...string) *exec.Cmd {
	script := filepath.Join(e2e.root, "examples", "check_epochs.py")
	return pythonCmd(append([]string{script, dir}, args...)...)
}

// parseCheckEpochs reads the RESULT of a check_epochs.py run with args
// that printed out and ended with err.
func parseCheckEpochs(t *testing.T, out []byte, err error, args []string) loaderResult {
	t.Helper()
	var res loaderResult
	i := strings.LastIndex(string(out), "RESULT ")
	if i < 0 {
		t.Fatalf("check_epochs.py %s: %v, no RESULT line:\n%s", strings.Join(args, " "), err, lastLines(string(out), 40))
	}
	line, _, _ := strings.Cut(string(out[i+len("RESULT "):]), "\n")
	if jerr := json.Unmarshal([]byte(line), &res); jerr != nil {
		t.Fatalf("check_epochs.py RESULT is not JSON (%v): %s", jerr, line)
	}
	if err != nil && res.OK {
		t.Errorf("check_epochs.py %s: %v although RESULT says ok:\n%s", strings.Join(args, " "), err, lastLines(string(out), 40))
	}
	return res
}

// checkEpochs compares every epoch with the data set: each sample of each
// shard exactly once, every sample whole and matching its recorded sha256.
func checkEpochs(t *testing.T, res loaderResult, want map[string]int, epochs int) {
	t.Helper()
	if len(res.Epochs) != epochs {
		t.Fatalf("%d epochs reported, want %d", len(res.Epochs), epochs)
	}
	for _, e := range res.Epochs {
		prefix := fmt.Sprintf("%s dataset, %d workers, epoch %d", res.Dataset, res.Workers, e.Epoch)
		if e.Samples != e2e.samples {
			t.Errorf("%s: %d samples, want %d", prefix, e.Samples, e2e.samples)
		}
		if e.DuplicateCount > 0 {
			t.Errorf("%s: %d samples seen more than once, e.g. %v", prefix, e.DuplicateCount, e.Duplicates)
		}
		if e.BadCount > 0 {
			t.Errorf("%s: %d samples do not match their .json, e.g. %v", prefix, e.BadCount, e.Bad)
		}
		for shard, n := range want {
			if e.PerShard[shard] != n {
				t.Errorf("%s: %q gave %d samples, want %d", prefix, shard, e.PerShard[shard], n)
			}
		}
		for shard := range e.PerShard {
			if _, ok := want[shard]; !ok {
				t.Errorf("%s: samples from %q, which is not a shard of the data set", prefix, shard)
			}
		}
	}
	if !res.OK {
		t.Errorf("%s dataset, %d workers: check_epochs.py reports failure", res.Dataset, res.Workers)
	}
}

// TestLoaderEpochs: both example datasets under a plain DataLoader with 2
// and 4 workers, two epochs each, on a fresh mount per worker count.
func TestLoaderEpochs(t *testing.T) {
	t.Parallel()
	want := samplesPerShard(t)
	const epochs = 2
	for _, workers := range []int{2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			m := mountShardfs(t, e2e.source())
			index := filepath.Join(t.TempDir(), "index.json")
			for _, dataset := range []string{"iterable", "map"} {
				t.Run(dataset, func(t *testing.T) {
					res := runCheckEpochs(t, m.dir, "--dataset", dataset, "--workers", strconv.Itoa(workers),
						"--epochs", strconv.Itoa(epochs), "--index", index, "--expect-samples", strconv.Itoa(e2e.samples))
					checkEpochs(t, res, want, epochs)
				})
			}
		})
	}
}

// TestLoaderRanksSplitShards: two ranks of the IterableDataset together see
// every shard exactly once and no shard twice.
func TestLoaderRanksSplitShards(t *testing.T) {
	t.Parallel()
	want := samplesPerShard(t)
	m := mountShardfs(t, e2e.source())
	seen := map[string]int{}
	for rank := range 2 {
		res := runCheckEpochs(t, m.dir, "--workers", "2", "--rank", strconv.Itoa(rank), "--world-size", "2", "--no-verify")
		for shard, n := range res.Epochs[0].PerShard {
			if seen[shard] != 0 {
				t.Errorf("shard %q read by both ranks", shard)
			}
			seen[shard] += n
		}
	}
	for shard, n := range want {
		if seen[shard] != n {
			t.Errorf("ranks 0 and 1 together read %d samples of %q, want %d", seen[shard], shard, n)
		}
	}
}

// TestManyReaders: 64 readers at once over 16 shards (four per shard, with
// different read sizes), every byte checked; once with the daemon as
// built (with -race under SHARDFS_TEST_RACE=1) and once with GOMAXPROCS=1.
func TestManyReaders(t *testing.T) {
	t.Parallel()
	shards := append(e2e.smallShards()[:15], mustLookup(t, largeKey))
	chunkSizes := []int{4096, 1 << 20, 131072, 100_003}
	var objs []object
	var chunks []int
	for i, s := range shards {
		for j := range chunkSizes {
			objs = append(objs, s)
			chunks = append(chunks, chunkSizes[(i+j)%len(chunkSizes)])
		}
	}
	for _, procs := range []string{"", "1"} {
		name := "GOMAXPROCS=default"
		if procs != "" {
			name = "GOMAXPROCS=" + procs
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			argv := append([]string{"mount", "--foreground"}, e2e.endpoint()...)
			env := e2e.env()
			if procs != "" {
				env = e2e.env("GOMAXPROCS=" + procs)
			}
			m := startMount(t, dir, append(argv, e2e.source(), dir), env)
			readConcurrently(t, m, objs, chunks)
			if !isMounted(m.dir) {
				t.Errorf("%s not mounted after the readers finished", m.dir)
			}
		})
	}
}

func mustLookup(t *testing.T, key string) object {
	t.Helper()
	o, ok := lookup(e2e.objects, key)
	if !ok {
		t.Fatalf("%s is not in the data set", key)
	}
	return o
}
