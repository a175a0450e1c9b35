package cache

// Lock order (take the earlier before the later, never the reverse):
//
//	Cache.life  gate (gate.go), an RWMutex: Lookup, Get, ReadAt, Put and Lease
//	            enter it shared; Close shuts it, holding it exclusively, so the
//	            ring file is never closed under a reader. The promoter's
//	            copies enter it (MakeWholeFile): Close stops them first.
//	ring.mu     RWMutex: the slot table, the index, the write head and the
//	            occupancy figures. Held only to read or change those tables,
//	            never across I/O.
//	Arena.mu    Mutex (package arena): a shared RAM tier's slot states and free
//	            list. A leaf: held for no call out, no copy and no I/O; taken
//	            on ristretto's goroutine too (OnExit), which holds none of
//	            the above.
//
// A slot's pin count is an atomic. It is raised only while ring.mu is held
// (shared is enough) and the write head claims a slot only while holding
// ring.mu exclusively and seeing zero pins, so a slot that a reader, a lease
// or a writer holds is never claimed. Pins may be dropped without the lock.
// Counters are atomics and need no lock.

import (
	"errors"
	"sync"
	"sync/atomic"
)

var errChecksum = errors.New("CRC32C mismatch")

type slotState uint8

const (
	slotEmpty   slotState = iota
	slotValid             // holds the block named by key; indexed
	slotWriting           // claimed by a writer; not yet indexed
)

// slot is the in-memory view of one ring slot.
type slot struct {
	key      blockKey
	length   int64
	sums     chunkSums
	grains   uint32 // CRC32C of the header's grain table (grainSums.tableSum)
	gen      uint64
	state    slotState
	verified bool // read back and CRC-checked since it was written or the ring opened
	pins     atomic.Int32
}

// slotRef is what a reader learns about a pinned slot.
type slotRef struct {
	n        int64
	key      blockKey
	length   int64
	sums     chunkSums
	grains   uint32
	gen      uint64
	verified bool
}

// ring is the slot table and index of one ring file. The write head moves
// circularly and overwrites the oldest slot, skipping pinned ones.
type ring struct {
	file   *ringFile
	geo    geometry
	stats  *counters
	tables sync.Pool  // *[grainTableBytes]byte: grain tables being read back
	memo   *grainMemo // grain tables read back and checked

	mu        sync.RWMutex
	slots     []slot
	index     map[blockKey]int64 // valid slots
	writing   map[blockKey]int64 // slots being written, so a block is written once
	head      int64
	nextGen   uint64
	usedBytes int64
	usedSlots int64
}

func newRing(file *ringFile, geo geometry, stats *counters) *ring {
	return &ring{
		tables:  sync.Pool{New: func() any { return new([grainTableBytes]byte) }},
		memo:    newGrainMemo(geo.slots),
		file:    file,
		geo:     geo,
		stats:   stats,
		slots:   make([]slot, geo.slots),
		index:   make(map[blockKey]int64),
		writing: make(map[blockKey]int64),
		nextGen: 1,
	}
}

func (r *ring) has(k blockKey) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.index[k]
	return ok
}

// pin finds the slot holding k and pins it against overwrite.
func (r *ring) pin(k blockKey) (slotRef, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n, ok := r.index[k]
	if !ok {
		return slotRef{}, false
	}
	return r.pinLocked(n), true
}

func (r *ring) pinLocked(n int64) slotRef {
	s := &r.slots[n]
	s.pins.Add(1)
	return slotRef{n: n, key: s.key, length: s.length, sums: s.sums, grains: s.grains, gen: s.gen, verified: s.verified}
}

func (r *ring) unpin(n int64) { r.slots[n].pins.Add(-1) }

// readVerified reads the slot's data into buf (at least BlockSize, aligned)
// and checks every chunk's CRC. The slot must be pinned. Every byte read
// from the disk is counted.
func (r *ring) readVerified(ref slotRef, buf []byte) error {
	n := alignUp(ref.length)
	if err := r.file.readFull(buf[:n], r.geo.dataOffset(ref.n)); err != nil {
		return err
	}
	r.stats.ringBytesRead.Add(uint64(n))
	if !verifyChunks(buf[:ref.length], 0, ref.length, r.chunk(), ref.sums[:]) {
		return errChecksum
	}
	return nil
}

// readRange reads and checks the grains of the slot that bytes [lo, hi) of
// its data lie in, into buf (at least the chunks' size), and returns those
// bytes: a small read of a block costs its grains, not the block. The grain
// CRCs come from the slot's header, trusted when their table matches the
// CRC the ring keeps of it; a table that does not is as a grain that fails.
// A table that matched is kept (grainMemo): the slot's next small reads
// read their grains alone. Grains and table come through the page cache
// (ringFile.readPaged), where the next small read of them finds them.
// Grains that are not all there are read with the rest of their chunks:
// the disk is read anyway, a 64 KiB read costs it about what a 4 KiB one
// does, and the block's next small reads find their grains in memory. The
// slot must be pinned.
func (r *ring) readRange(ref slotRef, lo, hi int64, buf []byte) ([]byte, error) {
	grain := r.grain()
	first := lo / grain
	start, end := first*grain, min(((hi-1)/grain+1)*grain, ref.length)
	sums, err := r.grainTable(ref)
	if err != nil {
		return nil, err
	}
	at := r.geo.dataOffset(ref.n)
	data, read := buf[:end-start], end-start
	if !r.file.readIfPaged(data, at+start) {
		chunk := r.chunk()
		from, to := start/chunk*chunk, min(((end-1)/chunk+1)*chunk, ref.length)
		if err := r.file.readPaged(buf[:to-from], at+from); err != nil {
			return nil, err
		}
		data, read = buf[start-from:end-from], to-from
	}
	r.stats.ringBytesRead.Add(uint64(read))
	if !verifyChunks(data, int(first), ref.length, grain, sums[:]) {
		return nil, errChecksum
	}
	return data[lo-start : hi-start], nil
}

// grainTable returns the grain CRCs of the slot write ref names: kept, or
// read back from its header (and counted) and checked against ref.grains.
func (r *ring) grainTable(ref slotRef) (*grainSums, error) {
	if sums, ok := r.memo.get(ref); ok {
		return sums, nil
	}
	tablep := r.tables.Get().(*[grainTableBytes]byte)
	defer r.tables.Put(tablep)
	table := tablep[:]
	if err := r.file.readPaged(table, r.geo.headerOffset(ref.n)+grainTableOffset); err != nil {
		return nil, err
	}
	r.stats.ringBytesRead.Add(uint64(len(table)))
	if checksum(table) != ref.grains {
		return nil, errChecksum
	}
	return r.memo.put(ref, table), nil
}

func (r *ring) chunk() int64 { return chunkSizeFor(r.geo.blockSize) }

func (r *ring) grain() int64 { return grainSizeFor(r.geo.blockSize) }

// markVerified records that ref's data passed its CRC check.
func (r *ring) markVerified(ref slotRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := &r.slots[ref.n]; s.gen == ref.gen && s.state == slotValid {
		s.verified = true
	}
}

// drop forgets the block ref names, unless the slot has moved on.
func (r *ring) drop(ref slotRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := &r.slots[ref.n]; s.gen == ref.gen && s.state == slotValid {
		r.forgetLocked(ref.n)
	}
}

// forgetLocked turns a valid slot empty.
func (r *ring) forgetLocked(n int64) {
	s := &r.slots[n]
	if r.index[s.key] == n {
		delete(r.index, s.key)
	}
	r.usedBytes -= s.length
	r.usedSlots--
	s.state = slotEmpty
	s.verified = false
}

// claim reserves one slot for each key, in write-head order, so blocks
// put together land in consecutive slots. A key already cached or being
// written gets -1, as do keys left over when every slot is pinned. Claimed
// slots are pinned by the writer until commit or abort.
func (r *ring) claim(keys []blockKey) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Every entry starts at -1, not at slot 0: the loop stops at the first
	// key that finds no unpinned slot, and the keys after it must not be
	// written over slot 0, which may hold another block, pinned by a reader
	// or a lease, or be claimed by another writer.
	out := make([]int64, len(keys))
	for i := range out {
		out[i] = -1
	}
	for i, k := range keys {
		if _, ok := r.index[k]; ok {
			continue
		}
		if _, ok := r.writing[k]; ok {
			continue
		}
		n, ok := r.advanceLocked()
		if !ok {
			break
		}
		s := &r.slots[n]
		if s.state == slotValid {
			r.forgetLocked(n)
			r.stats.evictions.Add(1)
		}
		s.state = slotWriting
		s.key = k
		s.gen = r.nextGen
		r.nextGen++
		s.pins.Add(1)
		r.writing[k] = n
		out[i] = n
	}
	return out
}

// advanceLocked moves the head to the next unpinned slot and returns it.
func (r *ring) advanceLocked() (int64, bool) {
	for range r.geo.slots {
		n := r.head
		r.head = (r.head + 1) % r.geo.slots
		if r.slots[n].pins.Load() == 0 {
			return n, true
		}
	}
	return 0, false
}

// generation returns the generation claim gave slot n.
func (r *ring) generation(n int64) uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.slots[n].gen
}

// commit indexes a written slot and drops the writer's pin.
func (r *ring) commit(n, length int64, sums chunkSums, grains uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.slots[n]
	delete(r.writing, s.key)
	s.state = slotValid
	s.length = length
	s.sums = sums
	s.grains = grains
	// Not verified: the CRCs were computed on the bytes handed to the
	// device, not on what it holds. A lease, whose bytes a client reads
	// with no check of its own, reads the slot back once first.
	s.verified = false
	r.index[s.key] = n
	r.usedBytes += length
	r.usedSlots++
	s.pins.Add(-1)
}

// abort gives back a claimed slot that was not written.
func (r *ring) abort(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.slots[n]
	delete(r.writing, s.key)
	s.state = slotEmpty
	s.pins.Add(-1)
}

// write stores one block in claimed slot n: data first, then the header
// that vouches for it. data is aligned and padded to alignment; hdr is one
// encoded, aligned header sector. paged writes the data through the page
// cache, where small reads of it find it (ringFile.writePaged); a crash
// that loses those pages but not the header leaves chunk CRCs that do not
// match, as any torn slot.
func (r *ring) write(n int64, data, hdr []byte, paged bool) error {
	write := r.file.writeFull
	if paged {
		write = r.file.writePaged
	}
	if err := write(data, r.geo.dataOffset(n)); err != nil {
		return err
	}
	return r.file.writeFull(hdr, r.geo.headerOffset(n))
}

// occupancy returns the bytes and slots holding valid blocks.
func (r *ring) occupancy() (bytes, slots int64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.usedBytes, r.usedSlots
}
