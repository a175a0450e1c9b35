package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// getPool runs the GETs: it owns the GET slots, the queues of parts
// waiting for one (urgent, then read-ahead), the first-byte-first rule
// (a part's read-ahead waits while a read waits for its object's first
// bytes, and a part's head GET parks its rest until the object is read
// again), the accounting of parts being handed to the cache (sinkLagsLocked)
// and the goroutines that run the GETs. It is the only caller of the
// Fetcher and of Cache.Keep. Its state from closed on is guarded by
// Engine.mu (mu); no GET, ring read or Keep call runs under it.
type getPool struct {
	cfg   Config
	fetch Fetcher
	cache Cache // nil: none; fetched parts go to it, and parts are read from its ring
	mu    *sync.Mutex

	ctx    context.Context // cancelled by close; parent of every GET
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines of the GETs

	closed       bool
	running      int        // GETs in progress
	sinking      int        // GETs over whose bytes are being handed to the cache
	sinkingBytes int64      // budget charged to those GETs' parts, which stay pinned until Keep returns
	queue        [2][]*part // parts waiting for a GET slot: urgent, then read-ahead
	fillers      int        // readers whose every fetched block must reach the cache (Reader.FillCache)

	stats GetStats

	getHooks
}

// fillerLocked counts a reader that starts (1) or stops (-1) filling the
// cache: while any does, no fetched block skips it.
func (g *getPool) fillerLocked(delta int) { g.fillers += delta }

// getHooks are what the pool asks of the rest of the engine, each called
// with Engine.mu held.
type getHooks struct {
	// allocate returns the buffer of a part starting its GET (budget).
	allocate func(size int64) []byte
	// failed returns the error of a GET over r of obj that just failed,
	// or nil (the part table's failed ranges, failed.go).
	failed func(obj store.Object, r Range) error
	// ended is told that p's GET is over, its result final, with err: a
	// slot is free, and a failed part is let go so that the next read
	// retries. The pool hands nothing to the cache after a failure.
	ended func(p *part, err error)
	// release lets p go once nothing keeps it.
	release func(p *part)
}

func newGetPool(cfg Config, f Fetcher, c Cache, mu *sync.Mutex, hooks getHooks) *getPool {
	ctx, cancel := context.WithCancel(context.Background())
	return &getPool{cfg: cfg, fetch: f, cache: c, mu: mu, ctx: ctx, cancel: cancel, getHooks: hooks}
}

// closeLocked cancels every GET, and no deferred read-ahead starts from
// here on; wait then returns once their goroutines are gone.
func (g *getPool) closeLocked() {
	g.closed = true
	g.cancel()
}

// wait returns once no GET goroutine is left. Called without Engine.mu.
func (g *getPool) wait() { g.wg.Wait() }

// readExact is one GET of len(p) bytes of obj at off that is no part's,
// straight into p (exact.go): with one attempt when the range just failed
// (failed.go), cancelled by close. The caller holds no lock and counts it
// (fetchedLocked).
func (g *getPool) readExact(ctx context.Context, obj store.Object, p []byte, off int64, oneAttempt bool) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.ctx, cancel)()
	if oneAttempt {
		ctx = store.WithOneAttempt(ctx)
	}
	return g.fetch.ReadRange(ctx, obj, off, p)
}

// fetchedLocked counts a GET that brought n bytes.
func (g *getPool) fetchedLocked(n int) {
	g.stats.Gets++
	g.stats.FetchedBytes += int64(n)
}

// enqueueLocked starts p's GET, or queues it when Concurrency GETs run.
// Read-ahead waits while a read of the same object waits for the first
// bytes of its GET, and while a part's head holds back its rest. A dense
// object's background parts do not: at most denseInFlight of them run
// (denseRest.pumpLocked), and they are what its next reads find; held back
// behind every read that missed, they would arrive after the reads that
// wanted them, which would then wait on GETs of their own.
func (g *getPool) enqueueLocked(p *part) {
	if !p.urgent && p.why != forDenseRest && (p.o.awaitingFirst > 0 || p.o.heads > 0) {
		p.o.deferred = append(p.o.deferred, p)
		return
	}
	if g.running < g.cfg.Concurrency {
		g.startLocked(p)
		return
	}
	g.queue[queueOf(p)] = append(g.queue[queueOf(p)], p)
}

func queueOf(p *part) int {
	if p.urgent {
		return 0
	}
	return 1
}

// urgeLocked moves a queued or deferred part to the front line: a read now
// waits on it. Its read-ahead entry is skipped once it has started.
func (g *getPool) urgeLocked(p *part) {
	if p.urgent || p.state != partQueued {
		return
	}
	p.urgent = true
	g.enqueueLocked(p)
}

// needRestLocked is told that a read waits on p's bytes up to end. When
// they lie past p's head, the rest is fetched now: a parked rest starts,
// and a head GET still running does not park it. Without this, a read that
// was counted as the object's next read before p was made (it waited for
// budget meanwhile) would wait on a rest that waits for yet another read.
func (g *getPool) needRestLocked(p *part, end int64) {
	if !p.headPending || end <= p.off+p.head {
		return
	}
	p.restNeeded = true
	if p.state == partParked {
		g.restStartsLocked(p)
		p.to(evResume)
		g.enqueueLocked(p)
	}
}

// firstBytesLocked records that p, which a read waited on, has its first
// bytes or has ended, and starts the read-ahead deferred behind it.
func (g *getPool) firstBytesLocked(p *part) {
	if !p.awaitingFirst {
		return
	}
	p.awaitingFirst = false
	p.o.awaitingFirst--
	g.releaseDeferredLocked(p.o)
}

// releaseDeferredLocked starts o's deferred read-ahead once nothing holds
// it back.
func (g *getPool) releaseDeferredLocked(o *object) {
	if o.awaitingFirst > 0 || o.heads > 0 || g.closed {
		return
	}
	deferred := o.deferred
	o.deferred = nil
	for _, q := range deferred {
		// A stream closing lets go of its parts one by one: those it has
		// yet to drop are not worth a GET.
		if q.state == partQueued && q.wanted() {
			g.enqueueLocked(q)
		}
	}
}

// readArrivedLocked records a read of o: the parts whose head GET is over
// get the GET of their rest, and read-ahead deferred behind them starts.
func (g *getPool) readArrivedLocked(o *object) {
	o.reads++
	parked := o.parked
	o.parked = nil
	for _, p := range parked {
		if p.state == partParked {
			g.restStartsLocked(p)
			p.to(evResume)
			g.enqueueLocked(p)
		}
	}
}

// restStartsLocked records that p's head no longer holds anything back:
// the GET of its rest is starting, or p is gone.
func (g *getPool) restStartsLocked(p *part) {
	if !p.headPending {
		return
	}
	p.headPending = false
	o := p.o
	o.heads--
	if i := slices.Index(o.parked, p); i >= 0 {
		o.parked = slices.Delete(o.parked, i, i+1)
	}
	g.releaseDeferredLocked(o)
}

// startNextLocked fills free GET slots from the queues, urgent first.
func (g *getPool) startNextLocked() {
	for q := range g.queue {
		for g.running < g.cfg.Concurrency && len(g.queue[q]) > 0 {
			p := g.queue[q][0]
			g.queue[q][0] = nil
			g.queue[q] = g.queue[q][1:]
			if p.state == partQueued {
				g.startLocked(p)
			}
		}
	}
}

func (g *getPool) startLocked(p *part) {
	g.running++
	g.stats.PeakRunning = max(g.stats.PeakRunning, int64(g.running))
	p.to(evStart)
	if p.urgent && !p.fromRing && p.fetched == 0 {
		p.awaitingFirst = true
		p.o.awaitingFirst++
	}
	if p.buf == nil { // a part whose rest follows its head has one
		p.buf = g.allocate(p.size)
	}
	ctx, cancel := context.WithCancel(g.ctx)
	if g.failed(p.o.obj, Range{p.off, p.end}) != nil {
		ctx = store.WithOneAttempt(ctx) // failed.go
	}
	p.cancel = cancel
	g.wg.Add(1)
	go g.get(ctx, p, p.why.ringPlacement()) // why may change (adoption) while the GET runs
}

// get fills one part, from the cache where it holds the part and from the
// Fetcher for the rest, publishes the result to waiting reads, then hands
// what was fetched to the cache.
func (g *getPool) get(ctx context.Context, p *part, ringPlace cache.Placement) {
	defer g.wg.Done()
	defer p.cancel()
	want := p.end - p.off
	var fromRing int64
	if p.fromRing {
		fromRing = g.readRing(p, want, ringPlace)
	}
	var n, gets int
	var err error
	if fromRing < want {
		if p.fromRing {
			g.fellBackToStore(p)
		}
		from := max(fromRing, p.fetched)
		if p.head > 0 && p.fetched == 0 {
			n, err = g.fetchRest(ctx, p, 0, p.head)
			gets, from = 1, p.head
			if err == nil && g.parkAfterHead(p, n) {
				return
			}
		}
		if err == nil {
			err = ctx.Err() // a part removed during its head GET
		}
		if err == nil {
			var m int
			m, err = g.fetchRest(ctx, p, from, want)
			n, gets = n+m, gets+1
		}
	}

	g.mu.Lock()
	g.firstBytesLocked(p)
	g.running--
	g.stats.CacheBytes += fromRing
	g.stats.Gets += int64(gets)
	g.stats.FetchedBytes += int64(n)
	if err != nil && g.closed {
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
	g.startNextLocked()
	g.ended(p, err)
	if err != nil {
		g.mu.Unlock()
		return
	}
	place := p.why.placement()
	if g.cache == nil || !p.why.toCache() || fromRing == want || g.sinkLagsLocked(p, place) {
		if g.cache != nil && p.why.toCache() && fromRing < want {
			g.stats.SinkSkippedBytes += want - fromRing
		}
		g.release(p)
		g.mu.Unlock()
		return
	}
	p.pins++
	p.sinking = true
	g.sinking++
	g.sinkingBytes += p.size
	g.mu.Unlock()

	index, data := (p.off+fromRing)/g.cfg.BlockSize, p.buf[fromRing:want]
	// The cache decides whether a one-block buffer itself becomes its RAM
	// copy (a random reader's block); nothing writes a fetched part's
	// buffer again.
	own := fromRing == 0 && int64(len(p.buf)) <= g.cfg.BlockSize
	kept := g.cache.Keep(p.o.obj, index, data, p.sums.From(fromRing), place, own)

	g.mu.Lock()
	p.bufKept = kept
	p.sinking = false
	g.sinking--
	g.sinkingBytes -= p.size
	p.pins--
	g.release(p)
	g.mu.Unlock()
}

// parkAfterHead is called when p's head GET has brought its n bytes. When
// the object was read again since p was made, the rest follows at once
// (false). Otherwise p gives up its GET slot and waits for the next read
// (true): the reader may have wanted only those bytes.
func (g *getPool) parkAfterHead(p *part, n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p.fetched = p.head
	p.arrived.set(p.fetched) // a fetcher need not report progress
	// A part kept for the cache has its rest fetched at once: parked, it
	// would wait for a read of the object that may never come.
	if !p.live() || g.closed || p.o.reads != p.madeAtRead || p.restNeeded || p.why.keptUntilCached() {
		g.restStartsLocked(p)
		return false
	}
	g.firstBytesLocked(p)
	g.stats.Gets++
	g.stats.FetchedBytes += int64(n)
	g.running--
	p.to(evPark)
	p.o.parked = append(p.o.parked, p)
	g.startNextLocked()
	return true
}

// readRing copies p's blocks from the ring, one at a time so that reads
// waiting on the first are answered at once, and returns how many leading
// bytes it got (a multiple of BlockSize unless all of them): the ring may
// have lost a block since the part was made.
func (g *getPool) readRing(p *part, want int64, place cache.Placement) int64 {
	var done int64
	for done < want {
		end := min(done+g.cfg.BlockSize, want)
		if _, ok := g.cache.ReadAt(p.o.obj, p.buf[done:end], p.off+done, place); !ok {
			break
		}
		done = end
		p.arrived.set(done)
	}
	return done
}

// fetchRest GETs p's bytes from offset from (within the part) to want and
// returns how many it got, or the error that ended the GET.
func (g *getPool) fetchRest(ctx context.Context, p *part, from, want int64) (int, error) {
	first := true
	if g.cache != nil && p.sums == nil {
		p.sums = g.cache.Summer(p.size)
	}
	progress := store.WithProgress(ctx, func(n int) {
		p.sums.Advance(p.buf[:p.end-p.off], from, from+int64(n)) // the part's end, not this GET's: a head ends mid-grain
		p.arrived.set(from + int64(n))
		if first && n > 0 {
			first = false
			g.mu.Lock()
			g.firstBytesLocked(p)
			g.mu.Unlock()
		}
	})
	n, err := g.fetch.ReadRange(progress, p.o.obj, p.off+from, p.buf[from:want])
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
