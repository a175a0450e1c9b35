package prefetch

import (
	"context"
	"fmt"

	"github.com/shardfs/shardfs/store"
)

// Exact reads.
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
// BlockSize/SmallReadsPerBlock) is therefore fetched exactly: one GET of
// its own bytes, straight into the reader's buffer, cached nowhere, unless
// a part already covers one of its blocks (a read-ahead or an earlier
// read's part in flight), which serves it as before. Small reads still
// fetch whole blocks: a block holds many of them, which arrive close
// together, and the mount hands the block to the page cache (fs's
// page-cache fills use the same SmallReadsPerBlock).

// SmallReadsPerBlock: a read is small when a block holds at least this many
// of it.
const SmallReadsPerBlock = 8

// exactLocked reports whether st's read r, which its policy has just
// planned, is fetched exactly.
func (s *Engine) exactLocked(st *Stream, plan Plan, r Range) bool {
	bs := s.cfg.BlockSize
	if plan.Sequential || r.Len()*SmallReadsPerBlock <= bs || s.cache == nil ||
		st.obj.Size <= s.cache.Room() || s.sched.namesLocked(st.o) {
		return false
	}
	for b := r.Start / bs; b*bs < r.End; b++ {
		if s.parts.partAt(st.o, b*bs) != nil {
			return false
		}
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
