package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
	"github.com/shardfs/shardfs/tarindex"
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

// While the first shard's index is slow, the others are built ahead of the
// writer, up to 4 x concurrency shards and no more; the output stays in
// shard order. The builds run in a synctest bubble: synctest.Wait returns
// once every goroutine of indexShards is blocked, the first build on the
// held shard and the dispatcher on the bound, so the count is taken when
// no further build can start.
func TestIndexShardsBoundsWhatWaitsForTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storetest.NewMem()
		for i := range 40 {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("s%02d.jpg", i), Size: 3, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Write([]byte("abc"))
			tw.Close()
			mem.Put(fmt.Sprintf("s%02d.tar", i), buf.Bytes())
		}
		objs, err := mem.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		g := &gatedStore{Mem: mem, held: "s00.tar", open: make(chan struct{}), read: map[string]bool{}}
		x, err := tarindex.New(g, tarindex.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		done := make(chan error, 1)
		go func() {
			_, err := indexShards(context.Background(), &out, &errOut, x, objs, objs, 2)
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
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 40 {
			t.Fatalf("%d lines; want 40\n%s", len(lines), errOut.String())
		}
		for i, l := range lines {
			if want := fmt.Sprintf(`{"shard":"s%02d.tar","name":"s%02d.jpg",`, i, i); !strings.HasPrefix(l, want) {
				t.Fatalf("line %d = %s; want it to start %s", i, l, want)
			}
		}
	})
}
