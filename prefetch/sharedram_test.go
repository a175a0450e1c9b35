package prefetch

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/store"
)

// With a shared RAM tier, a random read of a block in RAM is copied out of
// the tier's slot into the caller's buffer, and so is a read spanning
// blocks: the handle keeps no block, which would be a copy of the whole
// block per read (the tier reuses its slots, so Get hands out copies).
func TestSharedRAMTierReadsAreCopiedOutOfTheSlot(t *testing.T) {
	const bs = 64 << 10
	for _, shared := range []bool{false, true} {
		cfg := cache.Config{MemorySize: 16 * bs, BlockSize: bs}
		if shared {
			cfg.SharedMemoryDir = t.TempDir()
		}
		c, err := cache.Open(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		data := make([]byte, 4*bs)
		rand.New(rand.NewSource(3)).Read(data)
		obj := store.Object{Key: "k", Size: int64(len(data)), ETag: "e"}
		for i := int64(0); i < 4; i++ {
			c.Put(obj, i, data[i*bs:(i+1)*bs], cache.ForRandomRead)
		}
		// No store: every read must come from the cache.
		s := newTestEngine(t, readerConfig(bs), nil, c)
		r := s.OpenReader(obj, false, 0)
		// The last two span blocks: copied out of both slots.
		for _, off := range []int64{3*bs + 100, bs + 7, 2*bs + 4000, bs + 9, 2*bs - 50, bs - 4000} {
			p := make([]byte, 4096)
			n, tier, err := r.ReadAt(t.Context(), p, off)
			if err != nil || n != len(p) || tier != metrics.TierCache || !bytes.Equal(p, data[off:off+4096]) {
				t.Fatalf("shared %v: read at %d: %d bytes from %s (%v), equal %v", shared, off, n, tier, err, bytes.Equal(p, data[off:off+4096]))
			}
		}
		if kept := r.last.data != nil; kept == shared {
			t.Errorf("shared %v: the handle kept a block: %v", shared, kept)
		}
		r.Close()
	}
}
