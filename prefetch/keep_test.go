package prefetch

import (
	"bytes"
	"sync"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// keepingSink keeps every buffer Keep is offered, as the cache's RAM tier
// does, and remembers what each held then.
type keepingSink struct {
	*recordingSink
	mu   sync.Mutex
	kept [][]byte // the buffers handed over
	was  [][]byte // their bytes when handed over
}

func (k *keepingSink) Summer(int64) *cache.Summer { return nil }

func (k *keepingSink) Keep(obj store.Object, index int64, data []byte, _ cache.Sums, place cache.Placement) bool {
	k.Put(obj, index, data, place)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, data)
	k.was = append(k.was, bytes.Clone(data))
	return true
}

// TestAKeptBufferIsNeverReused: a random reader's part whose buffer the
// cache kept as its RAM copy never gives that buffer to another part:
// after other objects are read through the same budget, every kept buffer
// still holds the bytes it was handed over with.
func TestAKeptBufferIsNeverReused(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	sink := &keepingSink{recordingSink: newRecordingSink(t, cfg.BlockSize)}
	s := newTestScheduler(t, cfg, &fakeFetcher{}, sink)
	rnd := fakeObject("random", 64*cfg.BlockSize)
	rt := s.Open(rnd)
	buf := make([]byte, 512)
	for i := int64(0); i < 16; i++ {
		if err := readCheck(ctx, rt, rnd, buf, (i*37%64)*cfg.BlockSize+100); err != nil {
			t.Fatal(err)
		}
	}
	rt.Close()
	for _, key := range []string{"after-1", "after-2"} {
		obj := fakeObject(key, 4*cfg.Memory)
		st := s.Open(obj)
		readAll(ctx, t, st, obj, 4096)
		st.Close()
	}
	settledStats(t, s)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.kept) == 0 {
		t.Fatal("no random read's part was offered to Keep")
	}
	for i, b := range sink.kept {
		if !bytes.Equal(b, sink.was[i]) {
			t.Fatalf("kept buffer %d of %d was written after it was handed over", i, len(sink.kept))
		}
	}
}
