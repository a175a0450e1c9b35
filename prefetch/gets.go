package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// getSlots are the GETs running and the parts waiting for a slot.
// Guarded by Engine.mu.
type getSlots struct {
	running      int        // GETs in progress
	sinking      int        // GETs over whose bytes are being handed to the Sink
	sinkingBytes int64      // budget charged to those GETs' parts, which stay pinned until the Sink returns
	queue        [2][]*part // parts waiting for a GET slot: urgent, then read-ahead
	fillers      int        // readers whose every fetched block must reach the Sink (Reader.FillCache)
}

// enqueueLocked starts p's GET, or queues it when Concurrency GETs run.
// Read-ahead waits while a read of the same object waits for the first
// bytes of its GET, and while a part's head holds back its rest. A dense
// object's background parts do not: at most denseInFlight of them run
// (pumpDenseLocked), and they are what its next reads find; held back
// behind every read that missed, they would arrive after the reads that
// wanted them, which would then wait on GETs of their own.
func (s *Engine) enqueueLocked(p *part) {
	if !p.urgent && p.why != forDenseRest && (p.o.awaitingFirst > 0 || p.o.heads > 0) {
		p.o.deferred = append(p.o.deferred, p)
		return
	}
	if s.gets.running < s.cfg.Concurrency {
		s.startLocked(p)
		return
	}
	s.gets.queue[queueOf(p)] = append(s.gets.queue[queueOf(p)], p)
}

func queueOf(p *part) int {
	if p.urgent {
		return 0
	}
	return 1
}

// urgeLocked moves a queued or deferred part to the front line: a read now
// waits on it. Its read-ahead entry is skipped once it has started.
func (s *Engine) urgeLocked(p *part) {
	if p.urgent || p.state != partQueued {
		return
	}
	p.urgent = true
	s.enqueueLocked(p)
}

// firstBytesLocked records that p, which a read waited on, has its first
// bytes or has ended, and starts the read-ahead deferred behind it.
func (s *Engine) firstBytesLocked(p *part) {
	if !p.awaitingFirst {
		return
	}
	p.awaitingFirst = false
	p.o.awaitingFirst--
	s.releaseDeferredLocked(p.o)
}

// releaseDeferredLocked starts o's deferred read-ahead once nothing holds
// it back.
func (s *Engine) releaseDeferredLocked(o *object) {
	if o.awaitingFirst > 0 || o.heads > 0 || s.closed {
		return
	}
	deferred := o.deferred
	o.deferred = nil
	for _, q := range deferred {
		// A stream closing lets go of its parts one by one: those it has
		// yet to drop are not worth a GET.
		if q.state == partQueued && q.wanted() {
			s.enqueueLocked(q)
		}
	}
}

// startNextLocked fills free GET slots from the queues, urgent first.
func (s *Engine) startNextLocked() {
	for q := range s.gets.queue {
		for s.gets.running < s.cfg.Concurrency && len(s.gets.queue[q]) > 0 {
			p := s.gets.queue[q][0]
			s.gets.queue[q][0] = nil
			s.gets.queue[q] = s.gets.queue[q][1:]
			if p.state == partQueued {
				s.startLocked(p)
			}
		}
	}
}

func (s *Engine) startLocked(p *part) {
	s.gets.running++
	s.stats.PeakRunning = max(s.stats.PeakRunning, int64(s.gets.running))
	p.to(evStart)
	if p.urgent && !p.fromRing && p.fetched == 0 {
		p.awaitingFirst = true
		p.o.awaitingFirst++
	}
	if p.buf == nil { // a part whose rest follows its head has one
		p.buf = s.budget.allocate(p.size)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	if s.failedLocked(p.o.obj, Range{p.off, p.end}) != nil {
		ctx = store.WithOneAttempt(ctx) // failed.go
	}
	p.cancel = cancel
	s.wg.Add(1)
	go s.get(ctx, p, p.why.ringPlacement()) // why may change (adoption) while the GET runs
}

// get fills one part, from the cache where it holds the part and from the
// Fetcher for the rest, publishes the result to waiting reads, then hands
// what was fetched to the Sink.
func (s *Engine) get(ctx context.Context, p *part, ringPlace cache.Placement) {
	defer s.wg.Done()
	defer p.cancel()
	want := p.end - p.off
	var fromRing int64
	if p.fromRing {
		fromRing = s.readRing(p, want, ringPlace)
	}
	var n, gets int
	var err error
	if fromRing < want {
		if p.fromRing {
			s.fellBackToStore(p)
		}
		from := max(fromRing, p.fetched)
		if p.head > 0 && p.fetched == 0 {
			n, err = s.fetchRest(ctx, p, 0, p.head)
			gets, from = 1, p.head
			if err == nil && s.parkAfterHead(p, n) {
				return
			}
		}
		if err == nil {
			err = ctx.Err() // a part removed during its head GET
		}
		if err == nil {
			var m int
			m, err = s.fetchRest(ctx, p, from, want)
			n, gets = n+m, gets+1
		}
	}

	s.mu.Lock()
	s.firstBytesLocked(p)
	s.gets.running--
	s.stats.CacheBytes += fromRing
	s.stats.Gets += int64(gets)
	s.stats.FetchedBytes += int64(n)
	if err != nil && s.closed {
		err = fmt.Errorf("prefetch %s: %w", p, ErrClosed)
	}
	p.err = err
	p.to(evFinish)
	if p.why.scheduled() {
		p.settledAt = time.Now()
	}
	if err == nil {
		p.arrived.set(want) // a fetcher need not report progress
	}
	close(p.done)
	s.startNextLocked()
	s.pumpScheduleLocked() // a GET slot is free (scheduleSlots)
	if err != nil {
		if p.live() {
			if !s.closed {
				s.registry.failed.add(objectID{p.o.obj.Key, p.o.obj.ETag}, Range{p.off, p.end}, err, time.Now())
			}
			s.stats.Errors++
			s.log.Warn("prefetch: fetch failed", "key", p.o.obj.Key, "off", p.off, "end", p.end, "err", err)
			s.removeLocked(p) // a failed part is forgotten, so the next read retries
		}
		s.freeLocked(p)
		s.mu.Unlock()
		return
	}
	s.registry.failed.forget(objectID{p.o.obj.Key, p.o.obj.ETag}, Range{p.off, p.end})
	place := p.why.placement()
	if s.sink == nil || fromRing == want || s.sinkLagsLocked(p, place) {
		if s.sink != nil && fromRing < want {
			s.stats.SinkSkippedBytes += want - fromRing
		}
		s.releaseIfUnusedLocked(p)
		s.mu.Unlock()
		return
	}
	p.pins++
	s.gets.sinking++
	s.gets.sinkingBytes += p.size
	s.mu.Unlock()

	index, data := (p.off+fromRing)/s.cfg.BlockSize, p.buf[fromRing:want]
	var kept bool
	if k, ok := s.sink.(keeper); ok {
		// The cache decides whether a one-block buffer itself becomes
		// its RAM copy (a random reader's block); nothing writes a
		// fetched part's buffer again.
		own := fromRing == 0 && int64(len(p.buf)) <= s.cfg.BlockSize
		kept = k.Keep(p.o.obj, index, data, p.sums.From(fromRing), place, own)
	} else {
		s.sink.Put(p.o.obj, index, data, place)
	}

	s.mu.Lock()
	p.bufKept = kept
	s.gets.sinking--
	s.gets.sinkingBytes -= p.size
	p.pins--
	s.releaseIfUnusedLocked(p)
	s.mu.Unlock()
}

// parkAfterHead is called when p's head GET has brought its n bytes. When
// the object was read again since p was made, the rest follows at once
// (false). Otherwise p gives up its GET slot and waits for the next read
// (true): the reader may have wanted only those bytes.
func (s *Engine) parkAfterHead(p *part, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.fetched = p.head
	p.arrived.set(p.fetched) // a fetcher need not report progress
	// A part kept for the cache has its rest fetched at once: parked, it
	// would wait for a read of the object that may never come.
	if !p.live() || s.closed || p.o.reads != p.madeAtRead || p.why.keptUntilCached() {
		s.restStartsLocked(p)
		return false
	}
	s.firstBytesLocked(p)
	s.stats.Gets++
	s.stats.FetchedBytes += int64(n)
	s.gets.running--
	p.to(evPark)
	p.o.parked = append(p.o.parked, p)
	s.startNextLocked()
	return true
}

// readRing copies p's blocks from the ring, one at a time so that reads
// waiting on the first are answered at once, and returns how many leading
// bytes it got (a multiple of BlockSize unless all of them): the ring may
// have lost a block since the part was made.
func (s *Engine) readRing(p *part, want int64, place cache.Placement) int64 {
	var done int64
	for done < want {
		end := min(done+s.cfg.BlockSize, want)
		if _, ok := s.cache.ReadAt(p.o.obj, p.buf[done:end], p.off+done, place); !ok {
			break
		}
		done = end
		p.arrived.set(done)
	}
	return done
}

// fetchRest GETs p's bytes from offset from (within the part) to want and
// returns how many it got, or the error that ended the GET.
func (s *Engine) fetchRest(ctx context.Context, p *part, from, want int64) (int, error) {
	first := true
	if k, ok := s.sink.(keeper); ok && p.sums == nil {
		p.sums = k.Summer(p.size)
	}
	progress := store.WithProgress(ctx, func(n int) {
		p.sums.Advance(p.buf[:p.end-p.off], from, from+int64(n)) // the part's end, not this GET's: a head ends mid-grain
		p.arrived.set(from + int64(n))
		if first && n > 0 {
			first = false
			s.mu.Lock()
			s.firstBytesLocked(p)
			s.mu.Unlock()
		}
	})
	n, err := s.fetch.ReadRange(progress, p.o.obj, p.off+from, p.buf[from:want])
	switch {
	case errors.Is(err, io.EOF) && int64(n) == want-from:
		err = nil
	case err == nil && int64(n) < want-from, errors.Is(err, io.EOF):
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		err = fmt.Errorf("prefetch %s: %w", p, err)
	}
	return n, err
}
