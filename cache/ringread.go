package cache

import (
	"errors"
	"log/slog"
)

// ringReader reads blocks back from the ring for the cache's reads: it pins
// a block's slot, reads the block into a buffer, checks its CRCs, and
// counts the hit or miss; a block that fails is dropped, so the caller
// refetches it. It asks live for the ring each time: nil once the ring is
// absent or switched off.
type ringReader struct {
	live  func() *ring
	bufs  *blockPool
	stats *counters
	log   *slog.Logger
}

// read reads block k, want bytes long, from the ring into buf (aligned,
// at least want rounded up to the alignment, the daemon's own memory) and
// verifies it; a block that fails is dropped. Callers count the bytes they
// serve.
func (rr *ringReader) read(k blockKey, want int64, buf []byte) bool {
	return rr.readInto(k, want, buf, true)
}

// readInto is read into buf that the daemon may not own (owned false: a
// client's shared mapping, which the client can write at any time). A
// mismatch there proves nothing about the ring: the block is kept, and
// the caller reads it again into memory of its own.
func (rr *ringReader) readInto(k blockKey, want int64, buf []byte, owned bool) bool {
	_, ok := rr.readPinned(k, want, func() []byte { return buf }, owned)
	return ok
}

// readNew reads block k, want bytes long, from the ring into a buffer of
// its own and returns the block's bytes. The buffer is allocated only
// once the ring is known to hold the block: a miss, what every cold
// random read meets first, costs no allocation (a zeroed block per miss
// would cost a small random read far more than the miss itself).
func (rr *ringReader) readNew(k blockKey, want int64) ([]byte, bool) {
	b, ok := rr.readPinned(k, want, func() []byte { return alignedBuffer(int(alignUp(want))) }, true)
	if !ok {
		return nil, false
	}
	return b[:want], true
}

// readPinned pins block k, then reads it into the buffer buf returns,
// called only when the ring holds the block, and verifies it; it returns
// that buffer. owned is as for readInto.
func (rr *ringReader) readPinned(k blockKey, want int64, buf func() []byte, owned bool) ([]byte, bool) {
	r, ref, ok := rr.pin(k, want)
	if !ok {
		return nil, false
	}
	var b []byte
	err := func() error {
		// Unpinned also when buf faults (a client's mapping truncated
		// under the read): a pin left behind holds its slot for ever.
		defer r.unpin(ref.n)
		b = buf()
		return r.readVerified(ref, b)
	}()
	if err != nil {
		if owned {
			rr.failed(r, ref, err)
		}
		return nil, false
	}
	rr.stats.ringHits.Add(1)
	return b, true
}

// readGrains copies bytes [lo, hi) of block k, want bytes long, into dst,
// reading and checking only the grains they lie in (ring.readRange); a
// block that fails is dropped. Callers count the bytes they serve.
func (rr *ringReader) readGrains(k blockKey, want, lo, hi int64, dst []byte) bool {
	r, ref, ok := rr.pin(k, want)
	if !ok {
		return false
	}
	bufp := rr.bufs.get()
	defer rr.bufs.put(bufp)
	data, err := func() ([]byte, error) {
		defer r.unpin(ref.n)
		return r.readRange(ref, lo, hi, *bufp)
	}()
	if err != nil {
		rr.failed(r, ref, err)
		return false
	}
	copy(dst, data)
	rr.stats.ringHits.Add(1)
	return true
}

// pin pins the ring slot holding block k, want bytes long; a block that
// is not there (or not that long) counts as a ring miss. The caller
// unpins ref.n.
func (rr *ringReader) pin(k blockKey, want int64) (*ring, slotRef, bool) {
	r := rr.live()
	if r == nil {
		return nil, slotRef{}, false
	}
	ref, ok := r.pin(k)
	if ok && ref.length != want {
		r.unpin(ref.n)
		ok = false
	}
	if !ok {
		rr.stats.ringMisses.Add(1)
		return nil, slotRef{}, false
	}
	return r, ref, true
}

// failed drops a block that could not be read back intact, so the caller
// refetches it.
func (rr *ringReader) failed(r *ring, ref slotRef, err error) {
	r.drop(ref)
	rr.stats.ringMisses.Add(1)
	if errors.Is(err, errChecksum) {
		rr.stats.checksumFailures.Add(1)
		rr.log.Warn("cache block failed its checksum; dropped", "slot", ref.n, "block", ref.key.index)
		return
	}
	rr.log.Warn("cache block unreadable; dropped", "slot", ref.n, "block", ref.key.index, "err", err)
}
