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

// TestScanFindsEveryMemberFromItsHeaders writes a tar with archive/tar
// (large samples, a name long enough for a PAX header, a directory) and
// checks that every regular member's data is found where the index says,
// reading about one window per large member, never the whole archive.
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
	mem := storetest.NewMem()
	mem.Put("shard.tar", archive)
	obj, err := mem.Stat(context.Background(), "shard.tar")
	if err != nil {
		t.Fatal(err)
	}
	f := &countingFetcher{Fetcher: mem}
	x := New(f)
	out, err := x.JSONLines(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(files) {
		t.Fatalf("index has %d lines, want %d regular members", len(lines), len(files))
	}
	for i, line := range lines {
		var m Member
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		if m.Name != files[i].name || m.Size != int64(len(files[i].data)) || !bytes.Equal(archive[m.Offset:m.Offset+m.Size], files[i].data) {
			t.Fatalf("line %d = %+v; want %s, %d bytes, whose data lies at its offset", i, m, files[i].name, len(files[i].data))
		}
	}
	if got, limit := f.bytes.Load(), int64(len(archive))/4; got > limit {
		t.Errorf("indexing read %d bytes of a %d-byte archive; want at most %d: headers only", got, len(archive), limit)
	}
	// A second ask is served from memory.
	before := f.reads.Load()
	if _, err := x.JSONLines(context.Background(), obj); err != nil || f.reads.Load() != before {
		t.Errorf("second index of the same version: err %v, %d more reads; want none", err, f.reads.Load()-before)
	}
	t.Logf("%d members, %d reads, %d of %d bytes", len(files), f.reads.Load(), f.bytes.Load(), len(archive))
}

func TestScanRefusesWhatIsNotTar(t *testing.T) {
	mem := storetest.NewMem()
	mem.Put("x.tar", bytes.Repeat([]byte("not a tar header "), 100))
	obj, _ := mem.Stat(context.Background(), "x.tar")
	if _, err := Scan(context.Background(), mem, obj); err == nil || !strings.Contains(err.Error(), "x.tar") {
		t.Fatalf("Scan of a non-tar = %v; want an error naming the object", err)
	}
}

// Readers asking for one shard's index at once share one scan.
func TestConcurrentAsksShareOneScan(t *testing.T) {
	var files []file
	for i := range 20 {
		files = append(files, file{fmt.Sprintf("s%02d.jpg", i), bytes.Repeat([]byte{byte(i)}, 64<<10)})
	}
	archive := writeTar(t, files, "")
	mem := storetest.NewMem()
	mem.Put("s.tar", archive)
	obj, _ := mem.Stat(context.Background(), "s.tar")
	one := &countingFetcher{Fetcher: mem}
	if _, err := Scan(context.Background(), one, obj); err != nil {
		t.Fatal(err)
	}
	shared := &countingFetcher{Fetcher: mem}
	x := New(shared)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := x.JSONLines(context.Background(), obj); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if shared.reads.Load() != one.reads.Load() {
		t.Errorf("8 concurrent asks made %d reads; one scan makes %d", shared.reads.Load(), one.reads.Load())
	}
}
