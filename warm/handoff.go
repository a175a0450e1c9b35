package warm

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// handoffs follows, per object version, the GETs the engine runs and the
// hand-off of their bytes to the cache, so that a shard is made a
// whole-shard file, and its reader closed, only once the bytes fetched for
// it are in the ring: a read is answered as soon as its bytes arrive,
// before its GET is over and they are handed to the cache. A GET that
// brought its whole range is handed to the cache by its goroutine once it
// is over (prefetch.Cache.Keep; no block skips it while a reader that
// fills the cache is open, and a warm's reads are sequential, so every GET
// is a part's), so each such GET is matched by one Keep; a GET that did
// not is matched by nothing.
type handoffs struct {
	mu      sync.Mutex
	pending map[version]int // GETs running, and GETs over whose bytes the cache has yet to take
	changed chan struct{}   // closed and replaced whenever a count falls
}

// version names one object version.
type version struct{ key, etag string }

func versionOf(obj store.Object) version { return version{obj.Key, obj.ETag} }

func newHandoffs() *handoffs {
	return &handoffs{pending: map[version]int{}, changed: make(chan struct{})}
}

// started counts a GET of obj that starts.
func (h *handoffs) started(obj store.Object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending[versionOf(obj)]++
}

// over counts the end of a GET of obj: when the engine hands its bytes to
// the cache (handed), the GET stays counted until the cache took them.
func (h *handoffs) over(obj store.Object, handed bool) {
	if !handed {
		h.done(obj)
	}
}

// done counts a GET of obj that failed, or whose bytes the cache took.
func (h *handoffs) done(obj store.Object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := versionOf(obj)
	if h.pending[v]--; h.pending[v] <= 0 {
		delete(h.pending, v)
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// settled returns once no GET of obj is running or handing its bytes to
// the cache, or when ctx ends.
func (h *handoffs) settled(ctx context.Context, obj store.Object) error {
	v := versionOf(obj)
	for {
		h.mu.Lock()
		n, changed := h.pending[v], h.changed
		h.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fetcher is the store as the engine sees it: each GET is followed in
// handoffs, and the bytes it brought are told to fetched.
type fetcher struct {
	prefetch.Fetcher
	h       *handoffs
	fetched func(n int64)
}

func (f fetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	f.h.started(obj)
	n, err := f.Fetcher.ReadRange(ctx, obj, off, p)
	// The engine's rule (prefetch's fetchRest): a GET brought its range
	// when it filled p, with no error or io.EOF.
	f.h.over(obj, n == len(p) && (err == nil || errors.Is(err, io.EOF)))
	f.fetched(int64(n))
	return n, err
}

// sink is the cache as the engine sees it: every hand-off is counted in
// handoffs once the cache took it, and neither a reader's whole read nor
// its close is passed on (Cache.ReadingWhole and Cache.ReadDone would
// make the shard a whole-shard file of the cache's own making; Run makes
// it itself).
type sink struct {
	*cache.Cache
	h *handoffs
}

func (s sink) Keep(obj store.Object, index int64, data []byte, sums cache.Sums, place cache.Placement, own bool) bool {
	kept := s.Cache.Keep(obj, index, data, sums, place, own)
	s.h.done(obj)
	return kept
}

func (sink) ReadingWhole(store.Object)   {}
func (sink) ReadDone(store.Object, bool) {}

var _ prefetch.Cache = sink{}
