package prefetch

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/shardfs/shardfs/store"
)

// Stream reads one object for one open handle, with read-ahead decided by
// its Policy. Its methods are safe for concurrent use (the kernel sends a
// handle's reads in parallel).
type Stream struct {
	s      *Engine
	o      *object
	obj    store.Object
	opener Opener  // who opened it: next-shard read-ahead follows its order (openers.go)
	policy *Policy // guarded by s.mu, like every field below
	// since: nextShards.opens before the streams open alongside this one
	// were opened, as if they had opened just before it. Objects opened
	// after it belong to this pass over the listing
	// (nextShards.spillLocked): readers that take shards in order open
	// them in any order.
	since uint64

	held      map[*part]struct{} // parts this stream keeps for reads to come
	heldBytes int64
	closed    bool

	// keepsPages: the kernel keeps the handle's pages, and the parts of
	// chunk reads are lent to them (Reader.KeepsPages, exact.go); lent
	// are those parts, pinned until their blocks are lent (lend.go).
	keepsPages bool
	lent       []*lentPart
	lending    atomic.Int32 // len(lent), for reads that do not take s.mu

	// sequential is policy.Sequential() as of the policy's last read, for
	// Sequential, which a read asks before it takes s.mu (readsRandomly).
	sequential atomic.Bool

	// wholeFile: whether the cache is told that the stream reads its
	// object whole (Cache.ReadingWhole), and whether it was.
	wholeFile wholeFileAsk
}

// wholeFileAsk is where a stream stands with Cache.ReadingWhole.
type wholeFileAsk uint8

const (
	wholeFileNever wholeFileAsk = iota // no cache, or a one-shot reader
	wholeFileLater                     // told once its run from the first byte is wholeFileAfter blocks long
	wholeFileAsked                     // told, by the stream or by the guess it took over (tells.go)
)

// wholeFileAfter is how many blocks a stream reads in order from its
// object's first byte before the cache is told it reads the object whole:
// a reader of one member of a shard, or of its header, starts no file.
const wholeFileAfter = 4

// askWholeLocked reports whether the cache is to be told now that the
// stream reads its object whole, and marks it told.
func (st *Stream) askWholeLocked() bool {
	if st.wholeFile != wholeFileLater || !st.policy.FromStart(wholeFileAfter*st.s.cfg.BlockSize) {
		return false
	}
	st.wholeFile = wholeFileAsked
	return true
}

// Open starts a stream over obj. If the start of obj was prefetched
// because the previous object was being streamed or a loader hinted it, the
// stream starts sequential with a window as wide as what is already there.
func (s *Engine) Open(obj store.Object) *Stream { return s.OpenBy(obj, 0) }

// OpenBy is Open for a stream opened by opener, whose opens teach
// next-shard read-ahead the order it takes objects in.
func (s *Engine) OpenBy(obj store.Object, opener Opener) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &Stream{s: s, obj: obj, opener: opener, policy: NewPolicy(s.cfg, obj.Size), held: map[*part]struct{}{}}
	if s.closed {
		st.closed = true
		return st
	}
	st.o = s.parts.object(obj)
	st.o.streams++
	st.since = s.next.openedLocked(obj.Key, opener, len(s.window.streams))
	s.window.openLocked(st)
	if st.o.wholeTold { // a guess's telling is the stream's now (tells.go)
		st.o.wholeTold = false
		st.wholeFile = wholeFileAsked
	}
	if s.next.foundLocked(st.o) {
		st.policy.Prime(s.parts.extent(st.o))
		st.sequential.Store(true)
	}
	return st
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt: n < len(p) only at the
// end of the object, with io.EOF. It waits while the budget is full and
// fails only when the fetch fails (the error wraps the Fetcher's, e.g.
// store.ErrChanged), ctx ends, or the stream or engine is closed.
func (st *Stream) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, _, err := st.ReadAtFromRing(ctx, p, off)
	return n, err
}

// ReadAtFromRing is ReadAt that also reports whether every byte it served
// was read from the ring rather than fetched.
func (st *Stream) ReadAtFromRing(ctx context.Context, p []byte, off int64) (n int, fromRing bool, err error) {
	data, fromRing, _, err := st.read(ctx, p, off, false)
	return len(data), fromRing, err
}

// ReadShared is ReadAtFromRing that answers without a copy where it can: a
// read that lies inside one part is answered with that part's own bytes,
// pinned until release is called, so a FUSE reply can be written straight
// from them. Otherwise data is p[:n] and release is nil. Callers call a
// non-nil release exactly once, as soon as the bytes are used: a lent part
// counts against the budget, so a caller that held it while waiting for
// another read could wait for ever. For the same reason a read that spans
// parts is copied into p, never answered while one part waits for another.
func (st *Stream) ReadShared(ctx context.Context, p []byte, off int64) (data []byte, cached bool, release func(), err error) {
	data, cached, pinned, err := st.read(ctx, p, off, true)
	if pinned == nil {
		return data, cached, nil, err
	}
	s := st.s
	return data, cached, func() {
		s.mu.Lock()
		s.unpinLocked(pinned)
		s.mu.Unlock()
	}, err
}

// read is ReadAtFromRing and, with inPlace, ReadShared: it returns the part
// whose bytes data is, still pinned, or nil when data is p[:n].
func (st *Stream) read(ctx context.Context, p []byte, off int64, inPlace bool) (data []byte, cached bool, pinned *part, err error) {
	s := st.s
	if off < 0 {
		return nil, false, nil, fmt.Errorf("prefetch %s: offset %d: %w", st.obj.Key, off, store.ErrInvalidRange)
	}
	if len(p) == 0 {
		return nil, false, nil, nil
	}
	if off >= st.obj.Size {
		return nil, false, nil, io.EOF
	}
	end := min(off+int64(len(p)), st.obj.Size)
	var eof error
	if int64(len(p)) > end-off {
		eof = io.EOF
	}

	s.mu.Lock()
	if st.closed || s.closed {
		s.mu.Unlock()
		return nil, false, nil, fmt.Errorf("prefetch %s: %w", st.obj.Key, ErrClosed)
	}
	plan := st.policy.Read(off, end-off)
	st.sequential.Store(plan.Sequential)
	switch how, chunk := s.largeReadLocked(st, plan, Range{off, end}); how {
	case exactly:
		s.applyLocked(st, plan, end-off, Range{}) // the policy's other plans: what it lets go, its next block
		s.mu.Unlock()
		n, err := s.readExact(ctx, st.obj, p[:end-off], off)
		if err == nil {
			err = eof
		}
		return p[:n], false, nil, err
	case withChunk:
		s.applyLocked(st, plan, end-off, Range{})
		s.chunkLocked(st, chunk, Range{off, end})
	default:
		s.applyLocked(st, plan, end-off, Range{off, end})
	}
	s.sched.readLocked(st.obj, Range{off, end})
	askWhole := st.askWholeLocked()
	s.mu.Unlock()
	s.tells.deliver(&s.mu, s.cache)
	if askWhole {
		s.cache.ReadingWhole(st.obj)
	}

	cached = true
	for pos := off; pos < end; {
		part, err := st.pin(ctx, pos, end, plan.Need.End, plan.Sequential)
		if err != nil {
			return p[:pos-off], false, nil, err
		}
		if inPlace && pos == off && part.end >= end {
			got, fromRing, err := st.serve(ctx, part, pos, end, plan.Sequential, nil)
			if err != nil {
				return nil, false, nil, err
			}
			return got, fromRing, part, eof
		}
		got, fromRing, err := st.serve(ctx, part, pos, end, plan.Sequential, p[pos-off:end-off])
		pos += int64(len(got))
		cached = cached && fromRing
		if err != nil {
			return p[:pos-off], false, nil, err
		}
	}
	return p[:end-off], cached, nil, eof
}

// Observe tells the stream about a read of n bytes at off that was served
// elsewhere (the cache): the policy sees it, the window moves on, and
// parts it consumed are released. It never waits.
func (st *Stream) Observe(off, n int64) {
	s := st.s
	defer s.tells.deliver(&s.mu, s.cache) // after the unlock: the policy's spill may guess
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.closed || s.closed || n <= 0 || off < 0 || off >= st.obj.Size {
		return
	}
	end := min(off+n, st.obj.Size)
	plan := st.policy.Read(off, n)
	st.sequential.Store(plan.Sequential)
	s.applyLocked(st, plan, end-off, Range{})
	s.sched.readLocked(st.obj, Range{off, end})
	for pos := off; pos < end; {
		p := s.parts.partAt(st.o, pos)
		if p == nil {
			pos = (pos/s.cfg.BlockSize + 1) * s.cfg.BlockSize
			continue
		}
		s.sched.consumeLocked(p, Range{pos, min(end, p.end)})
		st.creditLocked(p, min(end, p.end)-pos, plan.Sequential)
		pos = p.end
	}
}

// Close releases the stream: parts that only it wanted are dropped, their
// GETs cancelled, their budget freed.
func (st *Stream) Close() {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.closed {
		return
	}
	st.closed = true
	for len(st.lent) > 0 {
		st.unlendLocked(st.lent[0])
	}
	s.window.closeLocked(st)
	st.o.streams--
	s.parts.tidy(st.o)
	s.parts.unclaim(st)
}

// pin returns the part holding the byte at pos with a read pinned on it,
// creating it (up to needEnd) when absent: this is where a read waits for
// budget, making room by eviction when that is fair. The read wants the
// bytes up to readEnd. sequential is the stream's mode, recorded on a part
// it creates.
func (st *Stream) pin(ctx context.Context, pos, readEnd, needEnd int64, sequential bool) (*part, error) {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	waited := false
	defer func() {
		if waited {
			s.budget.waiting--
		}
	}()
	for {
		if st.closed || s.closed {
			return nil, fmt.Errorf("prefetch %s: %w", st.obj.Key, ErrClosed)
		}
		p := s.parts.partAt(st.o, pos)
		if p == nil {
			gap, fromRing := s.partSource(st.o, pos/s.cfg.BlockSize*s.cfg.BlockSize, needEnd, false)
			size := s.cfg.chargeOf(gap)
			if s.budget.fits(size) {
				p = s.newPartLocked(st.o, gap, Range{pos, readEnd}, fromRing, s.streamPurpose(true, sequential, fromRing))
			} else if !waited {
				// From here on read-ahead and prefetch yield to this read.
				s.stats.BudgetWaits++
				s.budget.waiting++
				waited = true
				if s.onBudgetWait != nil {
					s.onBudgetWait()
				}
			}
			if p == nil && s.budget.inUse-s.budget.dying+size > s.cfg.Memory && s.evictOneLocked(st) {
				continue
			}
		}
		if p != nil {
			s.holdLocked(st, p)
			s.gets.urgeLocked(p)
			s.gets.needRestLocked(p, readEnd)
			p.pins++
			s.stats.ReadPins++
			return p, nil
		}
		released := s.budget.released
		s.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("prefetch %s at %d: %w", st.obj.Key, pos, err)
		}
	}
}

// serve waits until the bytes [pos, end) wants of pinned part p have
// arrived, and returns them: copied into dst, p unpinned; or, when dst is
// nil, in place, p still pinned (unless it fails). It does not wait for
// the rest of the part: a read at the start of a part is answered while
// the part's GET still runs.
func (st *Stream) serve(ctx context.Context, p *part, pos, end int64, sequential bool, dst []byte) (got []byte, fromRing bool, err error) {
	s := st.s
	need := min(end, p.end) - p.off
	waited, err := st.awaitArrival(ctx, p, need)
	// Accounted and unpinned in a defer, so that a copy into dst that
	// faults (a client's shared mapping truncated under a GPU READ, turned
	// into a panic) leaves no pin behind: pinned parts are never freed,
	// and with enough of them every uncached read waits for budget.
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if waited > 0 {
			s.stats.Waits++
			s.stats.WaitNanos += int64(waited)
		}
		s.stats.ServedBytes += int64(len(got))
		p.served += int64(len(got))
		if !p.why.forRead() {
			s.stats.PrefetchedServedBytes += int64(len(got))
		}
		fromRing = p.fromRing
		s.sched.consumeLocked(p, Range{pos, pos + int64(len(got))})
		st.creditLocked(p, int64(len(got)), sequential)
		if dst != nil || err != nil {
			s.unpinLocked(p)
		}
		s.checkLocked()
	}()
	if err == nil {
		src := p.buf[pos-p.off : need]
		if dst == nil {
			got = src
		} else {
			got = dst[:copy(dst, src)]
		}
	}
	return got, fromRing, err
}

// unpinLocked ends one read's pin on p, freeing p if nothing else keeps it.
func (s *Engine) unpinLocked(p *part) {
	p.pins--
	s.stats.ReadPins--
	s.releaseIfUnusedLocked(p)
}

// awaitArrival waits until the first need bytes of p are final, and says
// how long it waited. Bytes that arrived are served even if the GET later
// fails; a read that needs bytes the GET never delivered gets its error.
func (st *Stream) awaitArrival(ctx context.Context, p *part, need int64) (time.Duration, error) {
	var start time.Time
	for {
		more := p.arrived.upTo(need)
		if more == nil {
			break
		}
		if start.IsZero() {
			start = time.Now()
			if st.s.onPartWait != nil {
				st.s.onPartWait()
			}
		}
		select {
		case <-more:
			continue
		case <-p.done:
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("prefetch %s at %d: %w", st.obj.Key, p.off+need, ctx.Err())
		}
		// done: the GET has ended; p.err is final.
		if p.arrived.upTo(need) == nil {
			break
		}
		return time.Since(start), p.err
	}
	if start.IsZero() {
		return 0, nil
	}
	return time.Since(start), nil
}

// creditLocked records that st read n bytes of p, and lets p go once it
// has read all of it, or, when st is reading randomly, once p's GET is
// over: the cache keeps the bytes, and a random reader will not come back
// soon. A part still arriving stays held: the kernel splits one large read
// into several requests, which follow the first into the same part.
// Called with Engine.mu held.
func (st *Stream) creditLocked(p *part, n int64, sequential bool) {
	read, ok := p.holders[st]
	if !ok {
		return
	}
	p.holders[st] = read + n
	if (!sequential && p.settled()) || read+n >= p.end-p.off {
		st.s.dropLocked(st, p)
	}
}

// readWhole reports whether the stream's reads covered its object whole,
// in one run, and whether the cache was told it reads the object whole.
func (st *Stream) readWhole() (whole, told bool) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	return st.policy.Whole(), st.wholeFile == wholeFileAsked
}

// Sequential reports whether the stream's policy is in a sequential run,
// as of its last read; it takes no lock.
func (st *Stream) Sequential() bool { return st.sequential.Load() }
