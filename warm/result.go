package warm

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Result is what a warm did.
type Result struct {
	Shards  int   // shards planned
	Done    int   // of them, warmed to the end (or found cached) without a failure
	Whole   int   // shards kept as whole-shard files
	Fetched int64 // bytes fetched (through a mount: bytes read)
	Skipped int64 // bytes already cached, not fetched
	Elapsed time.Duration
	Failed  map[string]error // the first failure of each shard that failed, by key
}

// FailedKeys returns the keys of the shards that failed, sorted.
func (r Result) FailedKeys() []string {
	keys := make([]string, 0, len(r.Failed))
	for k := range r.Failed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// recorder keeps a Result that workers record into concurrently.
type recorder struct {
	ctx      context.Context // its end interrupts the warm: what fails then is not a failure
	start    time.Time
	progress func(n int64)

	mu  sync.Mutex
	res Result
}

func newRecorder(ctx context.Context, p Plan, progress func(n int64)) *recorder {
	if progress == nil {
		progress = func(int64) {}
	}
	return &recorder{ctx: ctx, start: time.Now(), progress: progress,
		res: Result{Shards: len(p.Shards), Skipped: p.Cached, Failed: map[string]error{}}}
}

// fetched counts n bytes fetched (or read through a mount).
func (r *recorder) fetched(n int64) {
	r.progress(n)
	r.mu.Lock()
	r.res.Fetched += n
	r.mu.Unlock()
}

// finish records the end of key's warm: done, or its first failure. A
// failure once the warm is interrupted is the interruption's, not the
// shard's, and neither.
func (r *recorder) finish(key string, whole bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.res.Done++
		if whole {
			r.res.Whole++
		}
	case r.ctx.Err() != nil:
	default:
		if _, seen := r.res.Failed[key]; !seen {
			r.res.Failed[key] = err
		}
	}
}

// result returns the Result so far.
func (r *recorder) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Failed = maps.Clone(r.res.Failed)
	res.Elapsed = time.Since(r.start)
	return res
}

// forEach runs work over items, n at a time, until done or ctx ends.
func forEach[T any](ctx context.Context, items []T, n int, work func(T)) {
	var g errgroup.Group
	g.SetLimit(max(n, 1))
	for _, item := range items {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { work(item); return nil })
	}
	g.Wait()
}
