package tarindex

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// A persisted index serves a second Index over the same cache dir (a
// remount) with no store read; a new ETag builds again; a file cut short
// or changed is detected, counted and rebuilt, never served.
func TestPersistedIndexAcrossRemounts(t *testing.T) {
	var files []file
	for i := range 30 {
		files = append(files, file{"s" + string(rune('a'+i%26)) + ".jpg", bytes.Repeat([]byte{byte(i)}, 40<<10)})
	}
	archive := writeTar(t, files, "")
	mem, obj := memShard(t, "d/shard.tar", archive)
	dir := t.TempDir()
	cfg := Config{Dir: dir, Source: "s3://bucket/prefix"}
	ctx := context.Background()

	first := &countingFetcher{Fetcher: mem}
	want, err := newIndex(t, first, cfg).JSONLines(ctx, obj, nil)
	if err != nil || first.reads.Load() == 0 {
		t.Fatalf("first build: %d reads, err %v", first.reads.Load(), err)
	}

	remount := &countingFetcher{Fetcher: mem}
	x := newIndex(t, remount, cfg)
	if got, err := x.JSONLines(ctx, obj, nil); err != nil || !bytes.Equal(got, want) || remount.reads.Load() != 0 {
		t.Fatalf("after a remount: %d store reads, same index %v, err %v; want 0 reads, the same index", remount.reads.Load(), bytes.Equal(got, want), err)
	}
	if s := x.Stats(); s.Persisted != 1 || s.Scans != 0 {
		t.Errorf("stats after a remount: %+v; want 1 persisted, 0 scans", s)
	}

	// Another source over the same dir does not read this source's index.
	other := &countingFetcher{Fetcher: mem}
	if _, err := newIndex(t, other, Config{Dir: dir, Source: "s3://other"}).JSONLines(ctx, obj, nil); err != nil || other.reads.Load() == 0 {
		t.Errorf("another source: %d reads, err %v; want a build of its own", other.reads.Load(), err)
	}

	// A new version of the shard (new ETag) is built again.
	// The same size, other names: only the ETag tells the versions apart.
	renamed := make([]file, len(files))
	for i, f := range files {
		renamed[i] = file{"t" + f.name[1:], f.data}
	}
	mem.Put(obj.Key, writeTar(t, renamed, ""))
	changed, err := mem.Stat(ctx, obj.Key)
	if err != nil || changed.ETag == obj.ETag || changed.Size != obj.Size {
		t.Fatalf("rewritten shard: ETag %q, was %q, size %d, was %d, err %v", changed.ETag, obj.ETag, changed.Size, obj.Size, err)
	}
	rebuilt := &countingFetcher{Fetcher: mem}
	x = newIndex(t, rebuilt, cfg)
	want, err = x.JSONLines(ctx, changed, nil)
	if err != nil || rebuilt.reads.Load() == 0 || x.Stats().Persisted != 0 || parseLines(t, want)[0].Name != "ta.jpg" {
		t.Fatalf("changed ETag: %d reads, %+v, err %v; want a scan, not the persisted index", rebuilt.reads.Load(), x.Stats(), err)
	}
	if _, err := load(dir, cfg.Source, changed); err != nil {
		t.Errorf("the rebuilt index of the new ETag is not persisted: %v", err)
	}

	// A remount now serves the new version's index from the dir.
	if got, err := newIndex(t, mem, cfg).JSONLines(ctx, changed, nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the new version after a remount: err %v, same index %v", err, bytes.Equal(got, want))
	}

	path := persistPath(dir, cfg.Source, obj.Key)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"cut short":      good[:len(good)-20],
		"a byte changed": bytes.Replace(good, []byte(`"size":40960}`), []byte(`"size":40961}`), 1),
		"no header":      good[bytes.IndexByte(good, '\n')+1:],
	} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		f := &countingFetcher{Fetcher: mem}
		x := newIndex(t, f, cfg)
		got, err := x.JSONLines(ctx, changed, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: served %q, err %v; want the index rebuilt", name, got[:min(len(got), 80)], err)
		}
		if s := x.Stats(); s.PersistedCorrupt != 1 || s.Scans != 1 || f.reads.Load() == 0 {
			t.Errorf("%s: %+v, %d reads; want 1 corrupt counted and 1 scan", name, s, f.reads.Load())
		}
		if _, err := load(dir, cfg.Source, changed); err != nil {
			t.Errorf("%s: not persisted again after the rebuild: %v", name, err)
		}
	}
}
