package tarindex

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/store"
)

func finder(objs []store.Object) Finder {
	return func(key string) (store.Object, bool) {
		for _, o := range objs {
			if o.Key == key {
				return o, true
			}
		}
		return store.Object{}, false
	}
}

func TestSidecarKeys(t *testing.T) {
	for key, want := range map[string]string{
		"shard-000.tar":        "shard-000.idx shard-000.tar.idx",
		"a/b.c/train.0001.tar": "a/b.c/train.idx a/b.c/train.0001.tar.idx",
		".hidden.tar":          ".hidden.idx .hidden.tar.idx",
		"noext":                "noext.idx",
	} {
		if got := strings.Join(SidecarKeys(key), " "); got != want {
			t.Errorf("SidecarKeys(%q) = %s; want %s", key, got, want)
		}
	}
}

// A wds2idx sidecar beside a shard is used instead of a scan, for fewer
// store bytes, and gives the same index as Python's tarfile.
func TestSidecarUsedInsteadOfScan(t *testing.T) {
	f, objs, expect := pythonShards(t, "--sidecars")
	ctx := context.Background()
	scanned := &countingFetcher{Fetcher: f.Fetcher}
	sx := newIndex(t, scanned, Config{})
	x := newIndex(t, f, Config{})
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, "wds-") || !strings.HasSuffix(o.Key, ".tar") {
			continue
		}
		want, _ := os.ReadFile(filepath.Join(expect, o.Key+".jsonl"))
		got, err := x.JSONLines(ctx, o, finder(objs))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("index of %s with its sidecar: err %v\n%.600s\nwant\n%.600s", o.Key, err, got, want)
		}
		if _, err := sx.JSONLines(ctx, o, nil); err != nil {
			t.Fatal(err)
		}
	}
	if s := x.Stats(); s.Sidecars != 3 || s.Scans != 0 || s.SidecarsRejected != 0 {
		t.Errorf("stats: %+v; want 3 sidecars used, no scan", s)
	}
	t.Logf("3 shards: sidecars %d bytes in %d reads, scans %d bytes in %d reads", f.bytes.Load(), f.reads.Load(), scanned.bytes.Load(), scanned.reads.Load())
	if f.bytes.Load() >= scanned.bytes.Load() || f.reads.Load() >= scanned.reads.Load() {
		t.Errorf("with sidecars: %d bytes, %d reads; scanning: %d bytes, %d reads; want fewer of both", f.bytes.Load(), f.reads.Load(), scanned.bytes.Load(), scanned.reads.Load())
	}
}

// A sidecar that disagrees with its shard is not believed: the shard is
// scanned, the index equals tarfile's, and the sidecar is counted once.
func TestSidecarThatDisagreesIsIgnored(t *testing.T) {
	group := regexp.MustCompile(`(\S+) (\d+) (\d+) (\S+)`)
	// bump shifts the offset or size of the first member of sample line i,
	// or of its last when i is the last line.
	bump := func(s string, i, field, by int) string {
		lines := strings.Split(s, "\n")
		all := group.FindAllStringSubmatch(lines[i], -1)
		m := all[0]
		if i == 40 {
			m = all[len(all)-1]
		}
		n, _ := strconv.Atoi(m[field])
		m[field] = strconv.Itoa(n + by)
		lines[i] = strings.Replace(lines[i], m[0], strings.Join(m[1:], " "), 1)
		return strings.Join(lines, "\n")
	}
	dropLine := func(s string, i int) string {
		lines := strings.Split(s, "\n")
		return strings.Join(append(lines[:i:i], lines[i+1:]...), "\n")
	}
	for name, edit := range map[string]func(string) string{
		"offset moved a block": func(s string) string { return bump(s, 3, 2, 512) },
		"first size one more":  func(s string) string { return bump(s, 1, 3, 1) },
		"last size one more":   func(s string) string { return bump(s, 40, 3, 1) },
		"first name wrong":     func(s string) string { return strings.Replace(s, "sample00000.cls", "sample99999.cls", 1) },
		"a sample left out": func(s string) string {
			s = dropLine(s, 3)
			return strings.Replace(s, "v1.2 40", "v1.2 39", 1)
		},
		"last sample left out": func(s string) string {
			s = dropLine(s, 40)
			return strings.Replace(s, "v1.2 40", "v1.2 39", 1)
		},
		"count wrong":     func(s string) string { return strings.Replace(s, "v1.2 40", "v1.2 41", 1) },
		"v1.1, no names":  func(s string) string { return strings.Replace(s, "v1.2", "v1.1", 1) },
		"not an index":    func(s string) string { return "<html>not found</html>\n" },
		"offset past end": func(s string) string { return bump(s, 3, 2, 1<<30) },
		"member overlaps": func(s string) string { return bump(s, 3, 2, -1024) },
	} {
		t.Run(name, func(t *testing.T) {
			f, _, expect := pythonShards(t, "--sidecars")
			root := f.Fetcher.(*store.Local)
			side := filepath.Join(root.String(), "wds-gnu.idx")
			good, err := os.ReadFile(side)
			if err != nil {
				t.Fatal(err)
			}
			bad := edit(string(good))
			if bad == string(good) {
				t.Fatal("the edit changed nothing")
			}
			if err := os.WriteFile(side, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := root.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			shard, _ := finder(objs)("wds-gnu.tar")
			x := newIndex(t, f, Config{})
			got, err := x.JSONLines(context.Background(), shard, finder(objs))
			want, _ := os.ReadFile(filepath.Join(expect, "wds-gnu.tar.jsonl"))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("index with a bad sidecar: err %v\n%.300s\nwant\n%.300s", err, got, want)
			}
			if s := x.Stats(); s.SidecarsRejected != 1 || s.Sidecars != 0 || s.Scans != 1 {
				t.Errorf("stats: %+v; want the sidecar rejected once and a scan", s)
			}
			// Built again (an index memory too small to keep it): the bad
			// sidecar is neither read nor warned of again.
			small := newIndex(t, f, Config{Memory: 1})
			for range 2 {
				if _, err := small.JSONLines(context.Background(), shard, finder(objs)); err != nil {
					t.Fatal(err)
				}
			}
			if s := small.Stats(); s.SidecarsRejected != 1 || s.Scans != 2 {
				t.Errorf("two builds with a bad sidecar: %+v; want it rejected once, 2 scans", s)
			}
		})
	}
}
