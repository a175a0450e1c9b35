package prefetch

import (
	"context"

	"github.com/shardfs/shardfs/cache"
)

// A random reader's reads each cost a FUSE round trip. The mount
// (fs/pagefill.go) hands blocks to the kernel's page cache, so that the
// other reads of those blocks never leave the kernel; these methods say
// which blocks and lend them:
//   - after a small read (a block holds SmallReadsPerBlock of it), the
//     block it landed in, when the cache holds it whole: a fill never
//     waits for the store for it and never starts a GET;
//   - after a read of an object larger than the cache that fetched the
//     rest of its chunk (exact.go), the blocks of those parts, as they
//     arrive: the part stays pinned for the fills (Stream.lent) until each
//     of its blocks was lent, or the stream lends newer chunks.

// maxLentParts bounds the chunk parts a stream keeps pinned for fills; a
// newer one lets the oldest go, lent or not.
const maxLentParts = 8

// lentPart is a chunk part pinned for fills, and how many of its blocks
// were lent.
type lentPart struct {
	p    *part
	lent int64
}

// KeepsPages says the kernel keeps this handle's pages, so that the rest
// of a chunk fetched with a random read of an object larger than the cache
// can be handed to them (exact.go). Call it before the first read.
func (r *Reader) KeepsPages() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keepsPages = true
}

// FillRange returns the blocks [first, first+count) worth handing to the
// page cache after this handle's read of n bytes at off; count is 0 when
// none is. Only a handle reading randomly gets any: a sequential reader's
// pages come from the kernel's own read-ahead.
func (r *Reader) FillRange(off int64, n int) (first, count int64) {
	s, bs := r.s, r.s.cfg.BlockSize
	if s.cache == nil || r.oneShot || off < 0 || off >= r.obj.Size || !r.readsRandomly(off) {
		return 0, 0
	}
	if st := r.currentStream(); st != nil && st.lending.Load() > 0 {
		s.mu.Lock()
		run, ok := st.lentRun(off)
		s.mu.Unlock()
		if ok {
			return run.Start / bs, (run.End - run.Start + bs - 1) / bs
		}
	}
	if int64(n)*SmallReadsPerBlock > bs {
		return 0, 0 // the fill would cost about what it saves
	}
	return off / bs, 1
}

// BlockSize is the size of the blocks FillRange and LendBlock name.
func (r *Reader) BlockSize() int64 { return r.s.cfg.BlockSize }

// LendBlock returns block index whole, and its offset: from a chunk part
// lent to fills, copied into buf once its bytes arrived; else when the
// cache holds it, the RAM tier's own bytes (never written again), or the
// block copied into buf from a shared RAM tier's slot or from the ring,
// checked. buf must be BlockSize long.
// Nothing is promoted into RAM: the page cache is where the block goes.
// false once the handle is released.
func (r *Reader) LendBlock(index int64, buf []byte) (start int64, data []byte, ok bool) {
	r.mu.Lock()
	closed, st := r.closed, r.stream
	r.mu.Unlock()
	c, bs := r.s.cache, r.s.cfg.BlockSize
	start = index * bs
	if closed || c == nil || index < 0 || start >= r.obj.Size || int64(len(buf)) < bs {
		return 0, nil, false
	}
	n := min(bs, r.obj.Size-start)
	if st != nil && st.lending.Load() > 0 {
		if data, ok := st.lendFromPart(start, buf[:n]); ok {
			return start, data, true
		}
	}
	if !r.s.sharedRAM { // a shared tier's Get is a copy into a new buffer: ReadAt copies into buf
		if data, _, ok := c.Get(r.obj, index, cache.InRAM); ok && int64(len(data)) >= n {
			return start, data[:n], true
		}
	}
	if _, ok := c.ReadAt(r.obj, buf[:n], start, cache.ForReadAhead); !ok {
		return 0, nil, false
	}
	return start, buf[:n], true
}

// currentStream returns the handle's stream, nil before the first read
// that opened it and after Close.
func (r *Reader) currentStream() *Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream
}

// lendFromPart copies the block at start (len(dst) bytes) out of the lent
// part holding it, once they arrived; false when no lent part holds it or
// its GET failed. The last block lent lets the part go.
func (st *Stream) lendFromPart(start int64, dst []byte) ([]byte, bool) {
	s := st.s
	s.mu.Lock()
	lp := st.lentAt(start)
	if lp == nil || st.closed {
		s.mu.Unlock()
		return nil, false
	}
	p := lp.p
	p.pins++ // the copy below reads its buffer
	s.mu.Unlock()

	need := start + int64(len(dst)) - p.off
	_, err := st.awaitArrival(context.Background(), p, need)
	if err == nil {
		copy(dst, p.buf[start-p.off:need])
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	p.pins--
	if i := st.lentIndex(p); i >= 0 {
		lp := st.lent[i]
		lp.lent++
		if lp.lent*s.cfg.BlockSize >= p.end-p.off || err != nil {
			st.unlendLocked(lp)
		}
	}
	s.releaseIfUnusedLocked(p)
	return dst, err == nil
}

// lendLocked pins p, a chunk part st made, for fills; the oldest lent part
// goes when st lends more than maxLentParts.
func (st *Stream) lendLocked(p *part) {
	if len(st.lent) == maxLentParts {
		st.unlendLocked(st.lent[0])
	}
	p.pins++
	st.lent = append(st.lent, &lentPart{p: p})
	st.lending.Store(int32(len(st.lent)))
}

// unlendLocked unpins lp's part and forgets it.
func (st *Stream) unlendLocked(lp *lentPart) {
	i := st.lentIndex(lp.p)
	if i < 0 {
		return
	}
	st.lent = append(st.lent[:i], st.lent[i+1:]...)
	st.lending.Store(int32(len(st.lent)))
	lp.p.pins--
	st.s.releaseIfUnusedLocked(lp.p)
}

// lentAt returns the lent part holding the byte at off, nil when none.
func (st *Stream) lentAt(off int64) *lentPart {
	for _, lp := range st.lent {
		if off >= lp.p.off && off < lp.p.end {
			return lp
		}
	}
	return nil
}

// lentRun is the run of lent parts, end to end, that holds the byte at
// off: a chunk's read part and the part of the blocks before it.
func (st *Stream) lentRun(off int64) (Range, bool) {
	lp := st.lentAt(off)
	if lp == nil {
		return Range{}, false
	}
	run := Range{lp.p.off, lp.p.end}
	for grown := true; grown; {
		grown = false
		for _, q := range st.lent {
			switch {
			case q.p.end == run.Start:
				run.Start, grown = q.p.off, true
			case q.p.off == run.End:
				run.End, grown = q.p.end, true
			}
		}
	}
	return run, true
}

// lentIndex is the index of p in st.lent, -1 when absent.
func (st *Stream) lentIndex(p *part) int {
	for i, lp := range st.lent {
		if lp.p == p {
			return i
		}
	}
	return -1
}
