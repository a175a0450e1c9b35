//go:build e2e

package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
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

// member is one line of a member index.
type member struct {
	Shard  string `json:"shard,omitempty"`
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
}

func parseMembers(t *testing.T, what string, lines []byte) []member {
	t.Helper()
	var ms []member
	for i, line := range bytes.Split(bytes.TrimSuffix(lines, []byte{'\n'}), []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var m member
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s line %d %q: %v", what, i+1, line, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// headerBytes is what of a tar is not its members' data, up to its end:
// every header block before the last member's data, and the two zero
// blocks that end the archive. Building an index should fetch about this.
func headerBytes(ms []member) int64 {
	if len(ms) == 0 {
		return 1024
	}
	pad := func(m member) int64 { return m.Offset + (m.Size+511)/512*512 }
	var data int64
	for _, m := range ms {
		data += pad(m) - m.Offset
	}
	return pad(ms[len(ms)-1]) + 1024 - data
}

// indexSet is a data set of scripts/gen_index_shards.py: WebDataset-style
// and odd shards in the ustar, gnu and pax formats, with tarfile's listing
// of each.
type indexSet struct {
	shards string   // the shards (and sidecars) as uploaded
	expect string   // KEY.jsonl: tarfile's listing of shard KEY
	keys   []string // the .tar keys, sorted
}

func generateIndexSet(t *testing.T, args ...string) indexSet {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(sysPython, append([]string{filepath.Join(e2e.root, "scripts", "gen_index_shards.py"), out}, args...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen_index_shards.py: %v\n%s", err, msg)
	}
	s := indexSet{shards: filepath.Join(out, "shards"), expect: filepath.Join(out, "expect")}
	names, _ := filepath.Glob(filepath.Join(s.shards, "*.tar"))
	for _, n := range names {
		s.keys = append(s.keys, filepath.Base(n))
	}
	sort.Strings(s.keys)
	if len(s.keys) != 6 {
		t.Fatalf("gen_index_shards.py wrote %d shards; want 6", len(s.keys))
	}
	return s
}

func (s indexSet) want(t *testing.T, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.expect, key+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upload makes prefix of the test bucket hold the set's shards alone and
// returns its s3:// source.
func (s indexSet) upload(t *testing.T, prefix string) string {
	t.Helper()
	// sync, not copy: what an earlier run of the test added under prefix
	// goes (go test -count runs a test again against the same MinIO).
	if err := e2e.rclone("sync", s.shards, ":s3:"+e2e.bucket+"/"+prefix); err != nil {
		t.Fatal(err)
	}
	return "s3://" + e2e.bucket + "/" + prefix
}

// readIndex reads /.shardfs/index/KEY through the mount.
func readIndex(t *testing.T, mnt, key string) []byte {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(mnt, ".shardfs", "index", filepath.FromSlash(key)))
	if err != nil {
		t.Fatalf("index of %s: %v", key, err)
	}
	return got
}

// The member index the mount serves at /.shardfs/index/PATH equals Python's
// tarfile listing of the same shard, for every shard of the data set and of
// an index set (GNU long names, PAX headers, empty members, directories,
// links), and building them fetches about twice the header bytes.
func TestMemberIndexMatchesPythonTarfile(t *testing.T) {
	t.Parallel()
	set := generateIndexSet(t)
	sets := []struct {
		source string
		keys   []string
		want   func(key string) []byte
	}{
		{e2e.source(), nil, func(key string) []byte {
			out, err := exec.Command(sysPython, "-c", tarfileListing, filepath.Join(e2e.data, filepath.FromSlash(key))).Output()
			if err != nil {
				t.Fatalf("python tarfile %s: %v", key, err)
			}
			return out
		}},
		{set.upload(t, "index/"+t.Name()), set.keys, func(key string) []byte { return set.want(t, key) }},
	}
	for _, o := range e2e.objects {
		if strings.HasSuffix(o.key, ".tar") {
			sets[0].keys = append(sets[0].keys, o.key)
		}
	}
	for _, s := range sets {
		m := mountShardfs(t, s.source, "--prefetch-next", "0")
		before := mountStats(t, m.dir)
		var headers int64
		for _, key := range s.keys {
			got, want := readIndex(t, m.dir, key), s.want(key)
			if !bytes.Equal(got, want) {
				t.Fatalf("index of %s differs from Python's tarfile:\nmount:\n%.600s\ntarfile:\n%.600s", key, got, want)
			}
			headers += headerBytes(parseMembers(t, key, want))
		}
		after := mountStats(t, m.dir)
		fetched := after["store_bytes_total"] - before["store_bytes_total"]
		t.Logf("%s: indexed %d shards with %d header bytes, fetching %.0f bytes in %.0f GETs (%.2fx)", s.source, len(s.keys), headers,
			fetched, after["store_gets_total"]-before["store_gets_total"], fetched/float64(headers))
		if fetched > 3*float64(headers) {
			t.Errorf("indexing %d shards fetched %.0f bytes; want at most 3x their %d header bytes", len(s.keys), fetched, headers)
		}
		if got := after["index_scans_total"] - before["index_scans_total"]; got != float64(len(s.keys)) {
			t.Errorf("index_scans_total went up by %.0f; want %d, one per shard", got, len(s.keys))
		}
		if _, err := os.ReadFile(filepath.Join(m.dir, ".shardfs", "index", "no-such-shard.tar")); !os.IsNotExist(err) {
			t.Errorf("index of a missing shard: %v; want ENOENT", err)
		}
	}
}

// A remount over the same cache dir serves every index from it with no
// store GET; a shard overwritten with new content (new ETag) and an index
// file cut short on disk are built again, the latter logged and counted.
func TestMemberIndexPersistsAcrossRemounts(t *testing.T) {
	t.Parallel()
	set := generateIndexSet(t)
	prefix := "index/" + t.Name()
	source := set.upload(t, prefix)
	cache := t.TempDir()
	flags := append(cacheFlags(cache, "64MiB"), "--prefetch-next", "0")
	readAll := func(m *fgMount, want func(key string) []byte) {
		t.Helper()
		for _, key := range set.keys {
			if got := readIndex(t, m.dir, key); !bytes.Equal(got, want(key)) {
				t.Fatalf("index of %s differs from tarfile's:\n%.400s\nwant\n%.400s", key, got, want(key))
			}
		}
	}
	same := func(key string) []byte { return set.want(t, key) }

	m := mountShardfs(t, source, flags...)
	readAll(m, same)
	if s := mountStats(t, m.dir); s["index_scans_total"] != 6 {
		t.Errorf("first mount: %.0f scans; want 6", s["index_scans_total"])
	}
	m.stop(t)

	m = mountShardfs(t, source, flags...)
	before := mountStats(t, m.dir)
	readAll(m, same)
	after := mountStats(t, m.dir)
	if gets := after["store_gets_total"] - before["store_gets_total"]; gets != 0 || after["index_persisted_total"] != 6 || after["index_scans_total"] != 0 {
		t.Errorf("remount: %.0f store GETs, %.0f indexes from the cache dir, %.0f scans; want 0, 6, 0", gets, after["index_persisted_total"], after["index_scans_total"])
	}
	m.stop(t)

	// wds-gnu.tar gets odd-gnu.tar's bytes; wds-pax.tar's index file is
	// cut short.
	odd, err := os.ReadFile(filepath.Join(set.shards, "odd-gnu.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e2e.putObject(e2e.bucket, prefix+"/wds-gnu.tar", odd); err != nil {
		t.Fatal(err)
	}
	cut := cutPersistedIndex(t, cache, "wds-pax.tar")
	time.Sleep(1100 * time.Millisecond) // the persisted listing is then older than --metadata-ttl
	m = mountShardfs(t, source, append(flags, "--metadata-ttl", "1s")...)
	readAll(m, func(key string) []byte {
		if key == "wds-gnu.tar" {
			return set.want(t, "odd-gnu.tar")
		}
		return set.want(t, key)
	})
	s := mountStats(t, m.dir)
	if s["index_scans_total"] != 2 || s["index_persisted_total"] != 4 || s["index_persisted_corrupt_total"] != 1 {
		t.Errorf("after a new ETag and a cut index file: %.0f scans, %.0f persisted, %.0f corrupt; want 2, 4, 1",
			s["index_scans_total"], s["index_persisted_total"], s["index_persisted_corrupt_total"])
	}
	if n := strings.Count(m.output.String(), "persisted member index not used"); n != 1 {
		t.Errorf("the cut index file (%s) was logged %d times; want once\n%s", cut, n, lastLines(m.output.String(), 20))
	}
}

// cutPersistedIndex cuts short the persisted index of key in cache and
// returns its path.
func cutPersistedIndex(t *testing.T, cache, key string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(cache, "indexes", "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := bytes.Cut(b, []byte{'\n'})
		var h struct{ Key string }
		if json.Unmarshal(head, &h) == nil && h.Key == key {
			if err := os.WriteFile(f, b[:len(b)-100], 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no persisted index of %s among %d files in %s/indexes", key, len(files), cache)
	return ""
}

// A wds2idx sidecar beside a shard serves its index for fewer store bytes
// than a scan; a sidecar that disagrees with its shard is ignored with one
// logged, counted warning, and the index is still tarfile's.
func TestMemberIndexUsesSidecars(t *testing.T) {
	t.Parallel()
	plain := generateIndexSet(t)
	withIdx := generateIndexSet(t, "--sidecars")
	bad := filepath.Join(withIdx.shards, "wds-pax.idx")
	idx, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, bytes.Replace(idx, []byte("sample00000.cls"), []byte("sample00007.cls"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	bytesFor := map[string][2]float64{}
	for i, s := range []indexSet{plain, withIdx} {
		m := mountShardfs(t, s.upload(t, "index/"+t.Name()+[]string{"/plain", "/sidecars"}[i]), "--prefetch-next", "0")
		for _, key := range s.keys {
			before := mountStats(t, m.dir)["store_bytes_total"]
			for range 2 { // the second read is served from memory
				if got := readIndex(t, m.dir, key); !bytes.Equal(got, s.want(t, key)) {
					t.Fatalf("index of %s differs from tarfile's:\n%.400s", key, got)
				}
			}
			b := bytesFor[key]
			b[i] = mountStats(t, m.dir)["store_bytes_total"] - before
			bytesFor[key] = b
		}
		st := mountStats(t, m.dir)
		if i == 0 {
			continue
		}
		if st["index_sidecars_total"] != 2 || st["index_sidecars_rejected_total"] != 1 || st["index_scans_total"] != 4 {
			t.Errorf("with sidecars: %.0f used, %.0f rejected, %.0f scans; want 2 (wds-gnu, wds-ustar), 1 (wds-pax), 4",
				st["index_sidecars_total"], st["index_sidecars_rejected_total"], st["index_scans_total"])
		}
		if n := strings.Count(m.output.String(), "sidecar index disagrees"); n != 1 || !strings.Contains(m.output.String(), "wds-pax.idx") {
			t.Errorf("the bad sidecar was logged %d times; want once, naming wds-pax.idx\n%s", n, lastLines(m.output.String(), 20))
		}
	}
	for _, key := range []string{"wds-gnu.tar", "wds-ustar.tar"} {
		b := bytesFor[key]
		t.Logf("%s: scan %.0f store bytes, sidecar %.0f", key, b[0], b[1])
		if b[1] >= b[0] {
			t.Errorf("%s with its sidecar fetched %.0f store bytes; the scan %.0f; want fewer", key, b[1], b[0])
		}
	}
}

// `shardfs index SOURCE` writes the index of every shard, the mount's lines
// with the shard's key, to stdout or --out; with --cache-dir a mount of
// that cache dir then serves every index with no store GET. Bad input is
// one line and a non-zero exit.
func TestIndexCommand(t *testing.T) {
	t.Parallel()
	set := generateIndexSet(t)
	source := set.upload(t, "index/"+t.Name())
	var want []member
	for _, key := range set.keys {
		for _, m := range parseMembers(t, key, set.want(t, key)) {
			m.Shard = key
			want = append(want, m)
		}
	}
	r := runShardfs(e2e.env(), time.Minute, append([]string{"index", source}, e2e.endpoint()...)...)
	if r.err != nil || r.code != 0 {
		t.Fatalf("shardfs index: exit %d, %v\n%s", r.code, r.err, r.stderr)
	}
	if got := parseMembers(t, "stdout", []byte(r.stdout)); !equalMembers(got, want) {
		t.Fatalf("shardfs index wrote %d lines:\n%.600s\nwant %d, tarfile's with the shard's key", len(got), r.stdout, len(want))
	}

	cache, out := t.TempDir(), filepath.Join(t.TempDir(), "index.jsonl")
	r = runShardfs(e2e.env(), time.Minute, append([]string{"index", source, "--out", out, "--cache-dir", cache, "--concurrency", "2"}, e2e.endpoint()...)...)
	if r.err != nil || r.code != 0 || r.stdout != "" {
		t.Fatalf("shardfs index --out: exit %d, %v, stdout %q\n%s", r.code, r.err, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(out); err != nil || !equalMembers(parseMembers(t, out, b), want) {
		t.Fatalf("--out %s: %v, not the index", out, err)
	}
	if !strings.Contains(r.stderr, "0 from the cache dir, 0 from sidecars, 6 scanned") {
		t.Errorf("shardfs index summary %q; want 6 shards scanned", r.stderr)
	}
	// Again over the same cache dir: nothing fetched.
	r = runShardfs(e2e.env(), time.Minute, append([]string{"index", source, "--cache-dir", cache}, e2e.endpoint()...)...)
	if r.code != 0 || !equalMembers(parseMembers(t, "stdout", []byte(r.stdout)), want) ||
		!strings.Contains(r.stderr, ": 0 bytes fetched in 0 GETs; 6 from the cache dir") {
		t.Errorf("shardfs index again with the same --cache-dir: exit %d, stderr %q; want the index, 0 GETs, 6 from the cache dir", r.code, r.stderr)
	}
	m := mountShardfs(t, source, append(cacheFlags(cache, "64MiB"), "--prefetch-next", "0")...)
	before := mountStats(t, m.dir)
	for _, key := range set.keys {
		if got := readIndex(t, m.dir, key); !bytes.Equal(got, set.want(t, key)) {
			t.Fatalf("index of %s through a mount of the indexed cache dir:\n%.400s", key, got)
		}
	}
	after := mountStats(t, m.dir)
	if gets := after["store_gets_total"] - before["store_gets_total"]; gets != 0 || after["index_persisted_total"] != 6 {
		t.Errorf("mount of the cache dir shardfs index filled: %.0f store GETs, %.0f indexes persisted; want 0, 6", gets, after["index_persisted_total"])
	}

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"index", "s3://no-such-bucket-idx"}, "no such bucket"},
		{[]string{"index", "s3://" + e2e.bucket + "/other"}, "no .tar shard under"},
		{[]string{"index", source, "--include", "nothing-*.tar"}, "matches --include"},
		{[]string{"index", source, "--out", "/proc/no/such/dir/x.jsonl"}, "--out"},
		{[]string{"index", source, "--concurrency", "0"}, "--concurrency"},
		{[]string{"index"}, "usage"},
	} {
		r := runShardfs(e2e.env(), time.Minute, append(bad.args, e2e.endpoint()...)...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.err != nil || r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], bad.says) || r.stdout != "" {
			t.Errorf("shardfs %s: exit %d, err %v, stdout %q, stderr %q; want a non-zero exit and one line saying %q",
				strings.Join(bad.args, " "), r.code, r.err, r.stdout, r.stderr, bad.says)
		}
	}
	// A shard that is not a tar: named on its own line, exit 1, no --out.
	if err := e2e.putObject(e2e.bucket, "index/"+t.Name()+"/zz-not-a.tar", bytes.Repeat([]byte("not a tar "), 200)); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "x.jsonl")
	r = runShardfs(e2e.env(), time.Minute, append([]string{"index", source, "--out", out2}, e2e.endpoint()...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "failed: zz-not-a.tar: ") || !strings.Contains(r.stderr, "1 of 7 shards") {
		t.Errorf("a shard that is not a tar: exit %d, stderr %q; want exit 1 naming it", r.code, r.stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("--out written although a shard failed: %v", err)
	}
}

func equalMembers(a, b []member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
