package tarindex

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

// gatedStore holds every read of one key until open is closed and
// records the keys read meanwhile.
type gatedStore struct {
	*storetest.Mem
	held string
	open chan struct{}

	mu   sync.Mutex
	read map[string]bool
}

func (g *gatedStore) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	if obj.Key == g.held {
		<-g.open
	} else {
		g.mu.Lock()
		g.read[obj.Key] = true
		g.mu.Unlock()
	}
	return g.Mem.ReadRange(ctx, obj, off, p)
}

func (g *gatedStore) readKeys() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.read)
}

// batchShards puts n one-member shards sNN.tar (member sNN.jpg) into a
// fresh store and returns it with its listing.
func batchShards(t *testing.T, n int) (*storetest.Mem, []store.Object) {
	t.Helper()
	mem := storetest.NewMem()
	for i := range n {
		mem.Put(fmt.Sprintf("s%02d.tar", i), writeTar(t, []file{{fmt.Sprintf("s%02d.jpg", i), []byte("abc")}}, ""))
	}
	objs, err := mem.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return mem, objs
}

// checkBatchLines checks that out holds one line per shard of n, in
// shard order, each naming its shard and its member.
func checkBatchLines(t *testing.T, out []byte, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines; want %d\n%s", len(lines), n, out)
	}
	for i, l := range lines {
		if want := fmt.Sprintf(`{"shard":"s%02d.tar","name":"s%02d.jpg",`, i, i); !strings.HasPrefix(l, want) {
			t.Fatalf("line %d = %s; want it to start %s", i, l, want)
		}
	}
}

// While the first shard's index is slow, the others are built ahead of the
// writer, up to 4 x concurrency shards and no more; the output stays in
// shard order. The builds run in a synctest bubble: synctest.Wait returns
// once every goroutine of Write is blocked, the first build on the held
// shard and the dispatcher on the bound, so the count is taken when no
// further build can start.
func TestBatchBoundsWhatWaitsForTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, objs := batchShards(t, 40)
		g := &gatedStore{Mem: mem, held: "s00.tar", open: make(chan struct{}), read: map[string]bool{}}
		b := Batch{Index: newIndex(t, g, DefaultConfig()), Find: FinderOf(objs), Concurrency: 2}
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() {
			_, err := b.Write(context.Background(), &out, objs)
			done <- err
		}()
		synctest.Wait() // every build that may start has run
		if n := g.readKeys(); n != 4*2-1 {
			t.Errorf("%d shards built while the first waited; want %d (4 x concurrency, less the first)", n, 4*2-1)
		}
		close(g.open)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		checkBatchLines(t, out.Bytes(), 40)
	})
}

// WriteFile writes the file whole when every shard is indexed, and leaves
// an earlier file as it was, with nothing beside it, when a shard fails
// (it is reported, by name) or the context is cancelled.
func TestBatchWriteFileWholeOrNotAtAll(t *testing.T) {
	mem, objs := batchShards(t, 12)
	out := filepath.Join(t.TempDir(), "index.jsonl")
	b := Batch{Index: newIndex(t, mem, DefaultConfig()), Find: FinderOf(objs), Concurrency: 3}
	if failed, err := b.WriteFile(context.Background(), out, objs); failed != 0 || err != nil {
		t.Fatalf("WriteFile = %d failed, %v", failed, err)
	}
	whole, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	checkBatchLines(t, whole, 12)

	// A shard that is not a tar: the run fails, the file stays.
	mem.Put("s05.tar", bytes.Repeat([]byte("not a tar "), 200))
	objs, _ = mem.List(context.Background())
	var named []string
	b = Batch{Index: newIndex(t, mem, DefaultConfig()), Find: FinderOf(objs), Concurrency: 3,
		Failed: func(o store.Object, err error) { named = append(named, o.Key) }}
	if failed, err := b.WriteFile(context.Background(), out, objs); failed != 1 || err != nil {
		t.Fatalf("WriteFile with a broken shard = %d failed, %v; want 1, nil", failed, err)
	}
	if len(named) != 1 || named[0] != "s05.tar" {
		t.Errorf("failures reported for %v; want [s05.tar]", named)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.WriteFile(ctx, out, objs[:3]); err != nil {
		t.Fatalf("WriteFile cancelled: %v", err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, whole) {
		t.Errorf("a failed or cancelled run changed %s:\n%s", out, got)
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("%d entries beside the index after failed runs; want only the index", len(entries))
	}
}

// An --out in a directory that does not exist fails before any shard is
// read, naming the directory.
func TestBatchWriteFileNamesADirItCannotWriteIn(t *testing.T) {
	mem, objs := batchShards(t, 2)
	c := &countingFetcher{Fetcher: mem}
	dir := filepath.Join(t.TempDir(), "missing")
	b := Batch{Index: newIndex(t, c, DefaultConfig()), Find: FinderOf(objs), Concurrency: 1}
	_, err := b.WriteFile(context.Background(), filepath.Join(dir, "index.jsonl"), objs)
	if err == nil || !strings.Contains(err.Error(), "cannot write in "+dir) {
		t.Fatalf("err = %v; want it to name %s", err, dir)
	}
	if n := c.reads.Load(); n != 0 {
		t.Errorf("%d store reads before the output failed; want 0", n)
	}
}
