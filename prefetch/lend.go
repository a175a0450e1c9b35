package prefetch

import "github.com/shardfs/shardfs/cache"

// A random reader's small reads each cost a FUSE round trip, more than
// their bytes. The mount (fs/pagefill.go) hands the whole block such a
// read landed in to the kernel's page cache, so that the block's other
// reads never leave the kernel; these methods say which block that is and
// lend it. Only a block the cache holds whole is lent: a fill never waits
// for the store and never starts a GET.

// FillBlock returns the index of the block holding off when a fill of it
// is worth its copy: the handle reads randomly (a sequential reader's
// pages come from the kernel's own read-ahead) and there is a cache to
// lend from.
func (r *Reader) FillBlock(off int64) (int64, bool) {
	if r.s.cache == nil || r.oneShot || off < 0 || off >= r.obj.Size || !r.readsRandomly(off) {
		return 0, false
	}
	return off / r.s.cfg.BlockSize, true
}

// BlockSize is the size of the blocks FillBlock and LendBlock name.
func (r *Reader) BlockSize() int64 { return r.s.cfg.BlockSize }

// LendBlock returns block index whole, and its offset, when the cache
// holds it: the RAM tier's own bytes (never written again), or the block
// copied into buf, which must be BlockSize long, from a shared RAM tier's
// slot or from the ring, checked.
// Nothing is promoted into RAM: the page cache is where the block goes.
// false once the handle is released.
func (r *Reader) LendBlock(index int64, buf []byte) (start int64, data []byte, ok bool) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	c, bs := r.s.cache, r.s.cfg.BlockSize
	start = index * bs
	if closed || c == nil || index < 0 || start >= r.obj.Size || int64(len(buf)) < bs {
		return 0, nil, false
	}
	n := min(bs, r.obj.Size-start)
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
