package cache

import (
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/shardfs/shardfs/cache/arena"
)

// memTier is the RAM tier: whole blocks in ristretto, cost in bytes. It is a
// hint: a Set may be dropped or rejected, and nothing here says what the
// ring holds.
//
// Its blocks live on the Go heap, or, when the tier is shared, in an arena
// (package arena) that GPU clients map. A heap block is never written again
// once set, so readers may keep it; an arena slot is reused after
// eviction, so readers pin it for as long as they read it (view), and
// callers that keep a block get a copy (share).
type memTier struct {
	cache *ristretto.Cache[string, memBlock]
	arena *arena.Arena // nil: blocks on the heap
	stats *counters    // its hits, misses, bytes served and evictions
	// closing silences eviction counting while Close empties the cache,
	// which ristretto reports as an eviction of every item.
	closing atomic.Bool
}

// memBlock is one block of the tier: its bytes, and where the tier is
// shared, the arena slot they lie in.
type memBlock struct {
	b      []byte
	ref    arena.Ref
	shared bool
}

func newMemTier(size, blockSize int64, sharedDir string, stats *counters) (*memTier, error) {
	m := &memTier{stats: stats}
	if sharedDir != "" {
		a, err := arena.Open(sharedDir, size, blockSize)
		if err != nil {
			return nil, err
		}
		m.arena = a
		size = int64(a.Slots()) * blockSize
	}
	blocks := max(size/blockSize, 1)
	c, err := ristretto.NewCache(&ristretto.Config[string, memBlock]{
		NumCounters:        max(10*blocks, 1024),
		MaxCost:            size,
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict: func(*ristretto.Item[memBlock]) {
			if !m.closing.Load() {
				stats.ramEvictions.Add(1)
			}
		},
		// Every value that leaves the index (evicted, rejected, replaced)
		// gives its slot back.
		OnExit: func(v memBlock) {
			if v.shared {
				m.arena.Release(v.ref)
			}
		},
	})
	if err != nil {
		if m.arena != nil {
			m.arena.Close()
		}
		return nil, fmt.Errorf("memory cache: %w", err)
	}
	m.cache = c
	return m, nil
}

// has reports whether the tier holds block k whole (want bytes).
func (m *memTier) has(k blockKey, want int64) bool {
	v, ok := m.cache.Get(k.memKey())
	return ok && int64(len(v.b)) == want
}

// view calls fn with block k's bytes (want long) while they cannot change;
// false, without calling fn, when the tier does not hold the block whole.
// fn must not keep the slice.
func (m *memTier) view(k blockKey, want int64, fn func([]byte)) bool {
	v, ok := m.cache.Get(k.memKey())
	if !ok || int64(len(v.b)) != want {
		return false
	}
	if !v.shared {
		fn(v.b)
		return true
	}
	if !m.arena.Pin(v.ref) {
		return false // evicted since the lookup
	}
	defer m.arena.Unpin(v.ref)
	fn(v.b)
	return true
}

// block returns block k (want bytes long) as share does, counting the hit
// or miss; callers count the bytes they serve.
func (m *memTier) block(k blockKey, want int64) ([]byte, bool) {
	b, ok := m.share(k, want)
	m.count(ok)
	return b, ok
}

// copyOut copies block k (want bytes long) from offset from into dst when
// the tier holds it, counting the hit or miss and the bytes.
func (m *memTier) copyOut(k blockKey, want, from int64, dst []byte) bool {
	ok := m.copyHit(k, want, from, dst)
	if !ok {
		m.count(false)
	}
	return ok
}

// copyHit is copyOut counting a hit and its bytes only: for a caller that
// counts its miss with the read it goes on to (ReadRAM).
func (m *memTier) copyHit(k blockKey, want, from int64, dst []byte) bool {
	if !m.view(k, want, func(b []byte) { copy(dst, b[from:]) }) {
		return false
	}
	m.count(true)
	m.stats.ramBytesServed.Add(uint64(len(dst)))
	return true
}

func (m *memTier) count(hit bool) {
	if hit {
		m.stats.ramHits.Add(1)
	} else {
		m.stats.ramMisses.Add(1)
	}
}

// share returns block k's bytes for a caller to keep: the block itself on
// the heap, a copy of it from an arena.
func (m *memTier) share(k blockKey, want int64) ([]byte, bool) {
	var out []byte
	ok := m.view(k, want, func(b []byte) {
		if m.arena == nil {
			out = b
			return
		}
		out = alignedBuffer(int(alignUp(want)))[:want]
		copy(out, b)
	})
	return out, ok
}

// set offers b to the tier. On the heap the tier keeps b itself (no
// copy): callers hand over a buffer they no longer write. An arena copies
// b into a free slot, and drops it when no slot is free.
func (m *memTier) set(k blockKey, b []byte) {
	if m.arena == nil {
		m.cache.Set(k.memKey(), memBlock{b: b}, int64(len(b)))
		return
	}
	ref, ok := m.arena.Alloc()
	if !ok {
		return
	}
	slot := m.arena.Block(ref, int64(len(b)))
	copy(slot, b)
	if !m.cache.Set(k.memKey(), memBlock{b: slot, ref: ref, shared: true}, m.arena.BlockSize()) {
		m.arena.Release(ref) // dropped before the index saw it: no OnExit
	}
}

// pinPrefix pins, for a lease, the arena slots of the blocks of version
// ver from first on, up to last, that the tier holds whole, stopping at the
// first it does not (length says each block's length), and as far as the
// arena lets leases pin; none when it does not hold first.
func (m *memTier) pinPrefix(ver versionID, first, last int64, length func(int64) int64) []arena.Ref {
	if m.arena == nil {
		return nil
	}
	var refs []arena.Ref
	for i := first; i <= last; i++ {
		v, ok := m.cache.Get(blockKey{version: ver, index: i}.memKey())
		if !ok || !v.shared || int64(len(v.b)) != length(i) {
			break
		}
		refs = append(refs, v.ref)
	}
	return m.arena.PinLease(refs)
}

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
	if m.arena != nil {
		m.arena.Close()
	}
}
