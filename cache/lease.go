package cache

import (
	"fmt"
	"sync"

	"github.com/shardfs/shardfs/cache/arena"
	"github.com/shardfs/shardfs/store"
)

// Extent is a run of shard bytes lying contiguously in a ring file.
type Extent struct {
	Path       string // the ring file
	Offset     int64  // where the bytes start in Path
	Length     int64
	FileOffset int64 // where the bytes start in the shard
}

// Lease pins the slots holding a range of a shard until Release: ring
// slots (Lease), so the write head does not overwrite them, or the RAM
// tier's arena slots (LeaseRAM), so they are not reused.
type Lease struct {
	ring    *ring
	slots   []int64
	arena   *arena.Arena
	refs    []arena.Ref
	extents []Extent
	stats   *counters
	once    sync.Once
}

// Lease pins the ring slots holding obj's bytes [off, off+n), clipped to
// obj.Size, and describes where those bytes lie. Every block must be in the
// ring, else ErrNotCached. A slot is read back and CRC-checked the first
// time a lease covers it after it was written (by this process or, before
// Open, another), so a lease never hands out bytes that did not pass that
// check. What a lease promises, and what not, is in docs/SECURITY.md.
func (c *Cache) Lease(obj store.Object, off, n int64) (*Lease, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("lease %s [%d,+%d): %w", obj.Key, off, n, store.ErrInvalidRange)
	}
	if !c.life.enter() {
		return nil, fmt.Errorf("lease %s: cache closed: %w", obj.Key, ErrNotCached)
	}
	defer c.life.leave()
	r := c.liveRing()
	if r == nil {
		return nil, fmt.Errorf("lease %s: no cache ring: %w", obj.Key, ErrNotCached)
	}
	return c.leases.ofRing(r, obj, c.version(obj), off, min(off+n, obj.Size))
}

// LeaseRAM pins the RAM tier's slots holding obj's bytes from off on, up
// to off+n (clipped to obj.Size), as far as the tier holds them whole and
// leases may pin (half its slots), and describes where those bytes lie in
// the tier's shared file: the extents cover a prefix of the range. It is
// ErrNotCached when the tier is not shared (Config.SharedMemoryDir) or
// pins no block at off. The tier holds only bytes that passed their checks
// (from the store, or read back from the ring and verified).
func (c *Cache) LeaseRAM(obj store.Object, off, n int64) (*Lease, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("lease %s [%d,+%d): %w", obj.Key, off, n, store.ErrInvalidRange)
	}
	if !c.life.enter() {
		return nil, fmt.Errorf("lease %s: cache closed: %w", obj.Key, ErrNotCached)
	}
	defer c.life.leave()
	end := min(off+n, obj.Size)
	if c.ram == nil || c.ram.arena == nil || off >= end {
		return nil, fmt.Errorf("lease %s [%d,%d) from RAM: %w", obj.Key, off, end, ErrNotCached)
	}
	return c.leases.ofRAM(c.ram, obj, c.version(obj), off, end)
}

// leaser makes the cache's leases: it pins the slots of a range, checks
// ring slots not checked since Open, and maps the range onto the slots.
type leaser struct {
	blockSize int64
	stats     *counters
	bufs      *blockPool
	failed    func(r *ring, ref slotRef, err error) // drops a slot that failed its check (ringReader.failed)
}

// ofRing leases the ring slots of every block of obj (version ver)
// overlapping [off, end), all or none, checking each not checked since
// Open.
func (l *leaser) ofRing(r *ring, obj store.Object, ver versionID, off, end int64) (*Lease, error) {
	refs, ok := l.pinRange(r, obj, ver, off, end)
	if !ok {
		return nil, fmt.Errorf("lease %s [%d,%d): %w", obj.Key, off, end, ErrNotCached)
	}
	ls := &Lease{ring: r, stats: l.stats}
	for _, ref := range refs {
		ls.slots = append(ls.slots, ref.n)
	}
	if err := l.verifyPinned(r, refs); err != nil {
		ls.unpin()
		return nil, fmt.Errorf("lease %s [%d,%d): %w", obj.Key, off, end, err)
	}
	ls.extents = extentsOf(r, refs, l.blockSize, off, end)
	l.stats.leases.Add(1)
	return ls, nil
}

// pinRange pins the slots of every block overlapping [off, end), all or none.
func (l *leaser) pinRange(r *ring, obj store.Object, ver versionID, off, end int64) ([]slotRef, bool) {
	bs := l.blockSize
	r.mu.RLock()
	defer r.mu.RUnlock()
	var refs []slotRef
	for index := off / bs; index*bs < end; index++ {
		n, ok := r.index[blockKey{version: ver, index: index}]
		if !ok || r.slots[n].length != blockLength(obj, bs, index) {
			for _, ref := range refs {
				r.unpin(ref.n)
			}
			return nil, false
		}
		refs = append(refs, r.pinLocked(n))
	}
	return refs, true
}

// verifyPinned CRC-checks pinned slots not checked since Open.
func (l *leaser) verifyPinned(r *ring, refs []slotRef) error {
	var bufp *[]byte
	for _, ref := range refs {
		if ref.verified {
			continue
		}
		if bufp == nil {
			bufp = l.bufs.get()
			defer l.bufs.put(bufp)
		}
		if err := r.readVerified(ref, *bufp); err != nil {
			l.failed(r, ref, err)
			return ErrNotCached
		}
		r.markVerified(ref)
	}
	return nil
}

// ofRAM leases the arena slots of m (a shared tier) holding obj's blocks
// (version ver) from off on, up to end, as far as m holds them whole and
// leases may pin.
func (l *leaser) ofRAM(m *memTier, obj store.Object, ver versionID, off, end int64) (*Lease, error) {
	bs := l.blockSize
	first, last := off/bs, (end-1)/bs
	refs := m.pinPrefix(ver, first, last, func(i int64) int64 { return blockLength(obj, bs, i) })
	if len(refs) == 0 {
		return nil, fmt.Errorf("lease %s at %d from RAM: %w", obj.Key, off, ErrNotCached)
	}
	a := m.arena
	ls := &Lease{arena: a, refs: refs, stats: l.stats}
	for i, ref := range refs {
		start := (first + int64(i)) * bs
		lo, hi := max(off, start), min(end, start+bs)
		ls.extents = appendExtent(ls.extents, Extent{Path: a.Path(), Offset: a.Offset(ref) + lo - start, Length: hi - lo, FileOffset: lo})
	}
	l.stats.leases.Add(1)
	return ls, nil
}

// extentsOf maps [off, end) onto the pinned slots, merging blocks whose
// slots are adjacent in the file.
func extentsOf(r *ring, refs []slotRef, bs, off, end int64) []Extent {
	var out []Extent
	for _, ref := range refs {
		start := ref.key.index * bs
		lo, hi := max(off, start), min(end, start+ref.length)
		out = appendExtent(out, Extent{
			Path:       r.file.path,
			Offset:     r.geo.dataOffset(ref.n) + lo - start,
			Length:     hi - lo,
			FileOffset: lo,
		})
	}
	return out
}

// appendExtent appends e, merged into the last extent when it continues it
// both in the file and in the shard.
func appendExtent(out []Extent, e Extent) []Extent {
	if k := len(out) - 1; k >= 0 && out[k].Path == e.Path && out[k].Offset+out[k].Length == e.Offset &&
		out[k].FileOffset+out[k].Length == e.FileOffset {
		out[k].Length += e.Length
		return out
	}
	return append(out, e)
}

// Extents returns where the leased bytes lie, in shard order.
func (l *Lease) Extents() []Extent { return append([]Extent(nil), l.extents...) }

// Release unpins the slots. It is idempotent and safe after the cache is
// closed.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.unpin()
		l.stats.leases.Add(-1)
	})
}

func (l *Lease) unpin() {
	for _, n := range l.slots {
		l.ring.unpin(n)
	}
	if l.arena != nil {
		l.arena.UnpinLease(l.refs)
	}
}
