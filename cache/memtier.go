package cache

import (
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// memTier is the RAM tier: whole blocks in ristretto, cost in bytes. It is a
// hint: a Set may be dropped or rejected, and nothing here says what the
// ring holds.
type memTier struct {
	cache *ristretto.Cache[string, []byte]
	// closing silences eviction counting while Close empties the cache,
	// which ristretto reports as an eviction of every item.
	closing atomic.Bool
}

func newMemTier(size, blockSize int64, stats *counters) (*memTier, error) {
	m := &memTier{}
	blocks := max(size/blockSize, 1)
	c, err := ristretto.NewCache(&ristretto.Config[string, []byte]{
		NumCounters:        max(10*blocks, 1024),
		MaxCost:            size,
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict: func(*ristretto.Item[[]byte]) {
			if !m.closing.Load() {
				stats.ramEvictions.Add(1)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("memory cache: %w", err)
	}
	m.cache = c
	return m, nil
}

func (m *memTier) get(k blockKey) ([]byte, bool) { return m.cache.Get(k.memKey()) }

// set offers b to the tier, which keeps b itself (no copy): callers hand
// over a buffer they no longer write.
func (m *memTier) set(k blockKey, b []byte) { m.cache.Set(k.memKey(), b, int64(len(b))) }

// settle waits until the sets offered so far are admitted or dropped.
// Ristretto applies Sets from a buffer of thousands; with blocks of a MiB
// each, a burst of read-ahead would otherwise hold hundreds of MiB there,
// outside MaxCost.
func (m *memTier) settle() { m.cache.Wait() }

func (m *memTier) bytes() int64 { return m.cache.MaxCost() - m.cache.RemainingCost() }

// free is how many more bytes fit without evicting anything, counting
// only the sets already applied (see settle).
func (m *memTier) free() int64 { return m.cache.RemainingCost() }

func (m *memTier) close() {
	m.closing.Store(true)
	m.cache.Close()
}
