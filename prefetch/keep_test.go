package prefetch

import (
	"bytes"
	"sync"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// keepingCache keeps every buffer Keep is offered to own, as the cache's
// RAM tier does, and remembers what each held then, and the longest data
// offered to own.
type keepingCache struct {
	*recordingCache
	mu       sync.Mutex
	kept     [][]byte // the buffers handed over
	was      [][]byte // their bytes when handed over
	ownedMax int      // the longest data offered with own
	notOwned int      // Keep calls without own
}

// newKeepingEngine is an engine of cfg over a fake store whose cache is
// a keepingCache.
func newKeepingEngine(t *testing.T, cfg Config) (*keepingCache, *Engine) {
	sink := &keepingCache{recordingCache: newRecordingCache(t, cfg.BlockSize)}
	return sink, newTestEngine(t, cfg, &fakeFetcher{}, sink)
}

func (k *keepingCache) Keep(obj store.Object, index int64, data []byte, sums cache.Sums, place cache.Placement, own bool) bool {
	k.recordingCache.Keep(obj, index, data, sums, place, own)
	k.mu.Lock()
	defer k.mu.Unlock()
	if !own {
		k.notOwned++
		return false
	}
	k.ownedMax = max(k.ownedMax, len(data))
	k.kept = append(k.kept, data)
	k.was = append(k.was, bytes.Clone(data))
	return true
}

// TestAKeptBufferIsNeverReused: a random reader's part whose buffer the
// cache kept as its RAM copy never gives that buffer to another part:
// after other objects are read through the same budget, every kept buffer
// still holds the bytes it was handed over with.
func TestAKeptBufferIsNeverReused(t *testing.T) {
	ctx, cfg := testContext(t), smallConfig()
	sink, s := newKeepingEngine(t, cfg)
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

// TestOnlyOneBlockBuffersAreHandedOver: a part of several blocks (here
// read-ahead) is offered to the cache without its buffer: a RAM entry for
// one of its blocks would keep the whole buffer alive, uncounted, until
// the last of them left the tier. One-block parts (a random reader's) are
// handed over.
func TestOnlyOneBlockBuffersAreHandedOver(t *testing.T) {
	ctx, cfg := testContext(t), smallConfig()
	sink, s := newKeepingEngine(t, cfg)
	seq := fakeObject("seq.tar", 40*cfg.BlockSize)
	st := s.Open(seq)
	readAll(ctx, t, st, seq, int(cfg.BlockSize))
	st.Close()
	random := fakeObject("random.tar", 64*cfg.BlockSize)
	r := s.OpenReader(random, false, 0)
	buf := make([]byte, 512)
	for _, b := range []int64{40, 3, 27, 11, 59} {
		if _, _, err := r.ReadAt(ctx, buf, b*cfg.BlockSize+100); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	s.Close()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if int64(sink.ownedMax) > cfg.BlockSize {
		t.Errorf("a buffer of %d bytes was offered to own; a block is %d", sink.ownedMax, cfg.BlockSize)
	}
	if sink.notOwned == 0 || len(sink.kept) == 0 {
		t.Errorf("Keep offered %d buffers to own and %d parts without; the test wants both kinds", len(sink.kept), sink.notOwned)
	}
}
