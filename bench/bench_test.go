package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/store"
)

func benchDir(t *testing.T) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	var total int64
	for i, size := range []int{3 << 20, 1<<20 + 123, 5000} {
		data := bytes.Repeat([]byte{byte('a' + i)}, size)
		if err := os.WriteFile(filepath.Join(dir, "shard-"+string(rune('0'+i))+".tar"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(size)
	}
	return dir, total
}

func testSettings() Settings {
	return Settings{Name: "t", Chunk: 1 << 20, Workers: 2, Readers: 2, Opens: 5,
		TTFBSize: 4096, RandomSize: 1 << 20, RandomReads: 20, Seed: 1}
}

func TestBenchReadsEveryByteDirectAndThroughFiles(t *testing.T) {
	dir, total := benchDir(t)
	files, err := ListFiles(dir, "shard-*")
	if err != nil {
		t.Fatal(err)
	}
	local, err := store.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := local.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	direct := &directTarget{st: local, objs: objs}
	s := testSettings()
	for name, target := range map[string]Target{"files": files, "direct": direct} {
		for _, rangeSize := range []int64{0, 1 << 20} {
			s.RangeSize = rangeSize
			r, err := sequential(context.Background(), target, target.items(), s)
			if err != nil {
				t.Fatalf("%s seq, range %d: %v", name, rangeSize, err)
			}
			if r.bytes != total {
				t.Errorf("%s seq, range %d: read %d bytes, want %d", name, rangeSize, r.bytes, total)
			}
		}
		fb, err := firstByte(context.Background(), target, target.items(), s)
		if err != nil || fb.opens != s.Opens || fb.min > fb.median || fb.median > fb.max {
			t.Errorf("%s ttfb: %+v, %v", name, fb, err)
		}
		rr, err := random(context.Background(), target, target.items(), s)
		if err != nil || rr.reads != s.RandomReads || rr.bytes == 0 {
			t.Errorf("%s random: %+v, %v", name, rr, err)
		}
	}
}

// A file that is shorter than listed must fail the run, not pass as fast.
func TestBenchSequentialFailsOnShortRead(t *testing.T) {
	dir, _ := benchDir(t)
	files, err := ListFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "shard-0.tar"), 1<<20); err != nil {
		t.Fatal(err)
	}
	_, err = sequential(context.Background(), files, files.items(), testSettings())
	if err == nil || !strings.Contains(err.Error(), "shard-0.tar") {
		t.Fatalf("got %v, want a short-read error naming shard-0.tar", err)
	}
}

func TestListFilesSkipsHiddenDirsAndFilters(t *testing.T) {
	dir, _ := benchDir(t)
	if err := os.MkdirAll(filepath.Join(dir, ".shardfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".shardfs", "stats"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := ListFiles(dir, "shard-[01].tar")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range files.items() {
		keys = append(keys, it.key)
	}
	if strings.Join(keys, ",") != "shard-0.tar,shard-1.tar" {
		t.Errorf("listed %v, want shard-0.tar and shard-1.tar", keys)
	}
}
