package prefetch

import (
	"context"
	"fmt"

	"github.com/shardfs/shardfs/store"
)

// Random reads of objects larger than the cache.
//
// A random read fetches the blocks it touches, so that the block's other
// reads find it in the cache. That pays only while the block stays there
// until they come. An object larger than the whole cache (RAM tier and
// ring) read at random, fio's one random pass over a large file, pushes
// its first blocks out before their other reads arrive: each block is
// fetched again for each of them, and a read waits for a whole block
// when it wanted a quarter of it. Such an object is never dense (Classify
// says so for the same reason), so its rest is never fetched either.
//
// A random read of such an object that is not small (more than a
// BlockSize/SmallReadsPerBlock) and that no part covers (a read-ahead, or
// an earlier read's part in flight, serves it as before) is fetched one of
// two ways:
//
//   - Exactly: one GET of its own bytes, straight into the reader's
//     buffer, cached nowhere. This is the first read of its chunk (a
//     PartSize-aligned run of blocks): a reader that looks up a few
//     records in a huge file fetches what it reads and no more.
//   - With the rest of its chunk, when the handle's pages are kept by the
//     page cache (Reader.KeepsPages) and an earlier read of the object
//     landed in the same chunk: the reader is going through the object,
//     not looking things up in it. The run of the chunk's blocks around
//     the read's that no part covers and no chunk fetched is fetched, in
//     two GETs: the read's part, from its block on, first, and the blocks
//     before it; the read is answered from its first bytes, and the mount
//     hands the parts' blocks to the page cache as they arrive (lend.go), where the
//     chunk's other reads find them without reaching the daemon. The page
//     cache, not the RAM tier, keeps them: it is the one tier whose size
//     is the machine's free memory, and the bytes are there already for
//     every other reader of the file. Each block is fetched so at most
//     once while the object has open streams; a read of one that the
//     kernel has since evicted (or never got) is fetched exactly. When
//     such reads keep coming (a page cache too small for the object), the
//     object's reads are all exact from then on: the guesses are not
//     used.
//
// Small reads still fetch whole blocks: a block holds many of them, which
// arrive close together, and the mount hands the block to the page cache.

// SmallReadsPerBlock: a read is small when a block holds at least this many
// of it.
const SmallReadsPerBlock = 8

// maxChunkedBlocks bounds the record of one object's chunk reads (two
// bits a block: 256 KiB at 1 MiB blocks, a TiB); an object of more blocks
// is always read exactly.
const maxChunkedBlocks = 1 << 20

// largeRead is how a random read of an object larger than the cache is
// fetched.
type largeRead uint8

const (
	// throughParts: not such a read, or a part covers it; the stream's
	// parts serve it.
	throughParts largeRead = iota
	// exactly: one GET of its own bytes.
	exactly
	// withChunk: with the chunk's other blocks no part covers, in parts
	// lent to the page cache.
	withChunk
)

// chunkReads records, for an object larger than the cache, which chunks
// random reads landed in and which blocks were fetched with a chunk.
type chunkReads struct {
	touched bitset // by chunk
	fetched bitset // by block
	// made counts the chunks fetched, lost the reads of their blocks that
	// reached the engine all the same.
	made, lost int
}

// minChunksJudged: the lost reads before they can stop chunk reads of an
// object (a fill the queue dropped, or a read that came between a part's
// end and its fill, loses one now and then).
const minChunksJudged = 8

// used reports whether the object's chunks are being read from the page
// cache: not when reads of their blocks keep coming back, more than one
// for every four chunks fetched.
func (c *chunkReads) used() bool { return c.lost < minChunksJudged || c.lost*4 <= c.made }

// largeReadLocked reports how st's read r, which its policy has just
// planned, is fetched; for withChunk, the run of the chunk's blocks around
// r's that no part covers and no chunk fetched.
func (s *Engine) largeReadLocked(st *Stream, plan Plan, r Range) (largeRead, Range) {
	bs, ps := s.cfg.BlockSize, s.cfg.PartSize
	if plan.Sequential || r.Len()*SmallReadsPerBlock <= bs || s.cache == nil ||
		st.obj.Size <= s.cache.Room() || s.sched.namesLocked(st.o) {
		return throughParts, Range{}
	}
	first, last := r.Start/bs, (r.End-1)/bs
	for b := first; b <= last; b++ {
		if s.parts.partAt(st.o, b*bs) != nil {
			return throughParts, Range{}
		}
	}
	blocks := (st.obj.Size + bs - 1) / bs
	if !st.keepsPages || blocks > maxChunkedBlocks {
		return exactly, Range{}
	}
	if st.o.chunks == nil {
		st.o.chunks = &chunkReads{touched: newBitset((blocks*bs + ps - 1) / ps), fetched: newBitset(blocks)}
	}
	c := st.o.chunks
	chunk := r.Start / ps
	if c.fetched.any(first, last+1) {
		c.lost++ // the page cache had it and lost it, or never got it
		return exactly, Range{}
	}
	if c.touched.set(chunk) || !c.used() {
		return exactly, Range{} // the chunk's first read
	}
	unfetched := func(b int64) bool { return !c.fetched.has(b) && s.parts.partAt(st.o, b*bs) == nil }
	start, end := first, last+1
	for chunkStart := chunk * ps / bs; start > chunkStart && unfetched(start-1); start-- {
	}
	for chunkEnd := min((chunk+1)*ps/bs, blocks); end < chunkEnd && unfetched(end); end++ {
	}
	return withChunk, Range{start * bs, min(end*bs, st.obj.Size)}
}

// chunkLocked makes the parts over chunk for st's read r (largeReadLocked),
// each lent to the page cache, and records their blocks as fetched: from
// r's block to the chunk's end first, the part r waits on, then the blocks
// before r's. Both are urgent GETs: the mount's filler waits for the
// blocks in order, and the object's read-ahead would wait behind its
// reads' first bytes. A part the budget has no room for is left out (r's
// own pin waits for room for its part).
func (s *Engine) chunkLocked(st *Stream, chunk, r Range) {
	bs := s.cfg.BlockSize
	from := r.Start / bs * bs
	st.o.chunks.made++
	if s.chunkRunLocked(st, Range{from, chunk.End}, r) {
		s.chunkRunLocked(st, Range{chunk.Start, from}, Range{chunk.Start, from})
	}
}

// chunkRunLocked makes the chunk parts over run, urgent for read; false
// when the budget had no room for one.
func (s *Engine) chunkRunLocked(st *Stream, run, read Range) bool {
	bs := s.cfg.BlockSize
	for pos := run.Start; pos < run.End; {
		gap, fromRing := s.partSource(st.o, pos, run.End, false)
		if gap.Empty() {
			pos = gap.End + bs
			continue
		}
		if !s.budget.fits(s.cfg.chargeOf(gap)) {
			return false
		}
		waits := Range{max(read.Start, gap.Start), min(read.End, gap.End)}
		if waits.Empty() {
			waits = Range{}
		}
		p := s.newPartLocked(st.o, gap, waits, fromRing, forChunk)
		s.holdLocked(st, p)
		st.lendLocked(p)
		st.o.chunks.fetched.setRange(gap.Start/bs, (gap.End+bs-1)/bs)
		s.stats.ChunkReads++
		pos = gap.End
	}
	return true
}

// readExact fetches len(p) bytes of obj at off into p with one GET (the
// GET pool's readExact). A range whose GET just failed is tried once
// (failed.go); Close cancels it.
func (s *Engine) readExact(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	id, r := objectID{obj.Key, obj.ETag}, Range{off, off + int64(len(p))}
	s.mu.Lock()
	oneAttempt := s.parts.failure(obj, r) != nil
	s.stats.ExactReads++
	s.mu.Unlock()

	n, err := s.gets.readExact(ctx, obj, p, off, oneAttempt)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets.fetchedLocked(n)
	s.parts.failed.note(id, r, err, s.closed)
	switch {
	case err != nil && s.closed:
		err = fmt.Errorf("prefetch %s: %w", obj.Key, ErrClosed)
	case err != nil:
		s.stats.Errors++
	default:
		s.stats.ServedBytes += int64(n)
	}
	return n, err
}

// bitset is a fixed number of bits: blocks or chunks of one object (the
// chunk reads here, the density rule's touched blocks in dense.go).
type bitset []uint64

func newBitset(n int64) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int64) bool {
	return i >= 0 && i/64 < int64(len(b)) && b[i/64]&(1<<(i%64)) != 0
}

// set sets bit i and reports whether it was clear; false out of range.
func (b bitset) set(i int64) bool {
	if i < 0 || i/64 >= int64(len(b)) || b.has(i) {
		return false
	}
	b[i/64] |= 1 << (i % 64)
	return true
}

func (b bitset) setRange(from, to int64) {
	for i := from; i < to; i++ {
		b.set(i)
	}
}

// any reports whether a bit in [from, to) is set.
func (b bitset) any(from, to int64) bool {
	for i := from; i < to; i++ {
		if b.has(i) {
			return true
		}
	}
	return false
}
