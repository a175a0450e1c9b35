package tarindex

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

type countingFetcher struct {
	Fetcher
	reads, bytes atomic.Int64
}

func (c *countingFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	c.reads.Add(1)
	c.bytes.Add(int64(len(p)))
	return c.Fetcher.ReadRange(ctx, obj, off, p)
}

type file struct {
	name string
	data []byte
}

// writeTar writes files with archive/tar, after a directory entry dir
// when it is not "".
func writeTar(t *testing.T, files []file, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if dir != "" {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Size: int64(len(f.data)), Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// headerBytes is what of members' archive is not their data: every
// header block up to the last member's data, and the two zero blocks that
// end a tar.
func headerBytes(members []Member) int64 {
	if len(members) == 0 {
		return 2 * block
	}
	var data int64
	for _, m := range members {
		data += padded(m) - m.Offset
	}
	return padded(members[len(members)-1]) + 2*block - data
}

func parseLines(t *testing.T, out []byte) []Member {
	t.Helper()
	var ms []Member
	for i, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		var m Member
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		ms = append(ms, m)
	}
	return ms
}

func newIndex(t *testing.T, f Fetcher, cfg Config) *Index {
	t.Helper()
	if cfg.Memory == 0 {
		cfg.Memory = DefaultMemory
	}
	x, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// memShard puts archive into a fresh in-memory store as key.
func memShard(t *testing.T, key string, archive []byte) (*storetest.Mem, store.Object) {
	t.Helper()
	mem := storetest.NewMem()
	mem.Put(key, archive)
	obj, err := mem.Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return mem, obj
}

// TestScanFindsEveryMemberFromItsHeaders writes a tar with archive/tar
// (large samples, a name long enough for a PAX header, a directory) and
// checks that every regular member's data is found where the index says,
// fetching about twice the header bytes, never the data.
func TestScanFindsEveryMemberFromItsHeaders(t *testing.T) {
	var files []file
	for i := range 40 {
		key := strings.Repeat("k", 1+i*5) // past 100 bytes: a PAX header
		for _, ext := range []string{".jpg", ".json", ".cls"} {
			size := 100
			if ext == ".jpg" {
				size = 96<<10 + i*13
			}
			data := bytes.Repeat([]byte{byte(i), byte(len(ext))}, size/2+1)[:size]
			files = append(files, file{"dir/" + key + ext, data})
		}
	}
	archive := writeTar(t, files, "dir/")
	mem, obj := memShard(t, "shard.tar", archive)
	f := &countingFetcher{Fetcher: mem}
	x := newIndex(t, f, Config{})
	out, err := x.JSONLines(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := parseLines(t, out)
	if len(got) != len(files) {
		t.Fatalf("index has %d lines, want %d regular members", len(got), len(files))
	}
	for i, m := range got {
		if m.Name != files[i].name || m.Size != int64(len(files[i].data)) || !bytes.Equal(archive[m.Offset:m.Offset+m.Size], files[i].data) {
			t.Fatalf("line %d = %+v; want %s, %d bytes, whose data lies at its offset", i, m, files[i].name, len(files[i].data))
		}
	}
	h := headerBytes(got)
	if fetched := f.bytes.Load(); fetched > 3*h {
		t.Errorf("indexing fetched %d bytes of a %d-byte archive with %d header bytes; want at most 3x the header bytes", fetched, len(archive), h)
	}
	// A second ask is served from memory.
	before := f.reads.Load()
	if _, err := x.JSONLines(context.Background(), obj, nil); err != nil || f.reads.Load() != before {
		t.Errorf("second index of the same version: err %v, %d more reads; want none", err, f.reads.Load()-before)
	}
	t.Logf("%d members, %d reads, %d bytes of %d (header bytes %d)", len(files), f.reads.Load(), f.bytes.Load(), len(archive), h)
}

func TestScanRefusesWhatIsNotTar(t *testing.T) {
	mem, obj := memShard(t, "x.tar", bytes.Repeat([]byte("not a tar header "), 100))
	if _, err := Scan(context.Background(), mem, obj); err == nil || !strings.Contains(err.Error(), "x.tar") {
		t.Fatalf("Scan of a non-tar = %v; want an error naming the object", err)
	}
}

// gatedFetcher holds every read until open is closed.
type gatedFetcher struct {
	Fetcher
	open chan struct{}
}

func (g gatedFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	<-g.open
	return g.Fetcher.ReadRange(ctx, obj, off, p)
}

// Readers asking for one shard's index at once share one scan. The readers
// run in a synctest bubble and the scan's reads are held until
// synctest.Wait says every reader is blocked: all eight have asked before
// the scan can end, however the scheduler runs them.
func TestConcurrentAsksShareOneScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var files []file
		for i := range 20 {
			files = append(files, file{fmt.Sprintf("s%02d.jpg", i), bytes.Repeat([]byte{byte(i)}, 64<<10)})
		}
		mem, obj := memShard(t, "s.tar", writeTar(t, files, ""))
		one := &countingFetcher{Fetcher: mem}
		if _, err := Scan(context.Background(), one, obj); err != nil {
			t.Fatal(err)
		}
		open := make(chan struct{})
		shared := &countingFetcher{Fetcher: gatedFetcher{Fetcher: mem, open: open}}
		x := newIndex(t, shared, Config{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, err := x.JSONLines(context.Background(), obj, nil); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait() // every reader has asked: one scans, the others wait for it
		close(open)
		wg.Wait()
		if shared.reads.Load() != one.reads.Load() {
			t.Errorf("8 concurrent asks made %d reads; one scan makes %d", shared.reads.Load(), one.reads.Load())
		}
		if s := x.Stats(); s.Scans != 1 {
			t.Errorf("8 concurrent asks: %d scans, want 1", s.Scans)
		}
	})
}

// The memory holds rendered indexes within its bound, dropping the least
// recently asked.
func TestMemoryKeepsWithinItsBound(t *testing.T) {
	m := newMemory(100)
	m.put("a", make([]byte, 40))
	m.put("b", make([]byte, 40))
	m.get("a")
	m.put("c", make([]byte, 40)) // over 100: b, least recently asked, goes
	if _, ok := m.get("b"); ok {
		t.Error("b kept past the bound; want it dropped as the least recently used")
	}
	for _, id := range []string{"a", "c"} {
		if _, ok := m.get(id); !ok {
			t.Errorf("%s dropped; want kept", id)
		}
	}
	m.put("huge", make([]byte, 101))
	if _, ok := m.get("huge"); ok || m.used != 80 {
		t.Errorf("an index over the bound: kept %v, %d bytes held; want not kept, 80", ok, m.used)
	}
}
