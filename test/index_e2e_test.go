package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tarfileListing is Python's own reading of a tar: one JSON line per
// regular member, name, offset of its data and size, as the mount writes.
const tarfileListing = `
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t:
        if m.isfile():
            print(json.dumps({"name": m.name, "offset": m.offset_data, "size": m.size}, separators=(",", ":"), ensure_ascii=False))
`

// The member index the mount serves at /.shardfs/index/PATH equals Python's
// tarfile listing of the same shard, for every shard of the data set, and
// building them fetches headers, not shards.
func TestMemberIndexMatchesPythonTarfile(t *testing.T) {
	m := mountShardfs(t, e2e.source(), "--prefetch-next", "0")
	before := mountStats(t, m.dir)
	var shards, total int64
	for _, o := range e2e.objects {
		if !strings.HasSuffix(o.key, ".tar") {
			continue
		}
		shards++
		total += o.size
		got, err := os.ReadFile(filepath.Join(m.dir, ".shardfs", "index", filepath.FromSlash(o.key)))
		if err != nil {
			t.Fatalf("index of %s: %v", o.key, err)
		}
		out, err := exec.Command(sysPython, "-c", tarfileListing, filepath.Join(e2e.data, filepath.FromSlash(o.key))).Output()
		if err != nil {
			t.Fatalf("python tarfile %s: %v", o.key, err)
		}
		want := string(out)
		if string(got) != want {
			t.Fatalf("index of %s differs from Python's tarfile:\nmount:\n%.600s\ntarfile:\n%.600s", o.key, got, want)
		}
	}
	if shards == 0 {
		t.Fatal("the data set has no .tar shard to index")
	}
	after := mountStats(t, m.dir)
	fetched := after["store_bytes_total"] - before["store_bytes_total"]
	t.Logf("indexed %d shards (%d bytes) fetching %.0f bytes in %.0f GETs", shards, total, fetched, after["store_gets_total"]-before["store_gets_total"])
	if fetched > float64(total)/4 {
		t.Errorf("indexing %d shards fetched %.0f of their %d bytes; want headers only (at most a quarter)", shards, fetched, total)
	}
	if _, err := os.ReadFile(filepath.Join(m.dir, ".shardfs", "index", "no-such-shard.tar")); !os.IsNotExist(err) {
		t.Errorf("index of a missing shard: %v; want ENOENT", err)
	}
}
