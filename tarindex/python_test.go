package tarindex

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// pythonShards writes the shards of scripts/gen_index_shards.py into a
// temporary directory and returns a store over them, the objects and the
// directory of tarfile's listings (KEY.jsonl).
func pythonShards(t *testing.T, args ...string) (*countingFetcher, []store.Object, string) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "scripts", "gen_index_shards.py")
	out := t.TempDir()
	// Python's tarfile is the reference listing; any python3 on PATH has it.
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the tar index is checked against Python's tarfile: install python3 (%v)", err)
	}
	cmd := exec.Command(python, append([]string{script, out}, args...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, msg)
	}
	local, err := store.NewLocal(filepath.Join(out, "shards"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := local.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &countingFetcher{Fetcher: local}, objs, filepath.Join(out, "expect")
}

// The index of every shard equals Python's tarfile listing of it: names
// (GNU long names, PAX names, non-ASCII), data offsets and sizes, empty
// members, directories and links left out, in ustar, gnu and pax archives;
// building them all fetches about twice their header bytes.
func TestIndexEqualsPythonTarfile(t *testing.T) {
	f, objs, expect := pythonShards(t)
	x := newIndex(t, f, Config{})
	var shards, total, headers int64
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".tar") {
			continue
		}
		want, err := os.ReadFile(filepath.Join(expect, o.Key+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.JSONLines(context.Background(), o, nil)
		if err != nil {
			t.Fatalf("index of %s: %v", o.Key, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("index of %s differs from Python's tarfile:\nindex:\n%.900s\ntarfile:\n%.900s", o.Key, got, want)
		}
		shards++
		total += o.Size
		headers += headerBytes(parseLines(t, want))
	}
	if shards != 6 {
		t.Fatalf("indexed %d shards; the generator writes 6", shards)
	}
	fetched := f.bytes.Load()
	t.Logf("%d shards, %d bytes, %d header bytes: fetched %d bytes in %d reads (%.2fx the header bytes)",
		shards, total, headers, fetched, f.reads.Load(), float64(fetched)/float64(headers))
	if fetched > 3*headers {
		t.Errorf("indexing %d shards fetched %d bytes; want at most 3x their %d header bytes", shards, fetched, headers)
	}
}
