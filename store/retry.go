package store

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// RetryPolicy bounds how long one call may keep retrying.
type RetryPolicy struct {
	Attempts  int           // total attempts per call, at least 1
	BaseDelay time.Duration // first backoff; doubles per attempt
	MaxDelay  time.Duration // cap of one backoff
	Budget    time.Duration // a call gives up once this much time has passed (0 = Attempts only)
}

// DefaultRetryPolicy retries throttling, 5xx, resets and stalls for up to a
// minute, so a restarting store slows training rather than failing it.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Attempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second, Budget: time.Minute}
}

// Retry wraps a Store and retries transient failures (see Retryable) with
// exponential backoff and full jitter. Permanent failures (missing object,
// changed ETag, denied) return at once.
type Retry struct {
	Store
	policy  RetryPolicy
	log     *slog.Logger
	retries atomic.Int64
}

// WithRetry wraps s.
func WithRetry(s Store, p RetryPolicy, log *slog.Logger) *Retry {
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	return &Retry{Store: s, policy: p, log: log}
}

// Retries counts the retries made so far (attempts after the first).
func (r *Retry) Retries() int64 { return r.retries.Load() }

func (r *Retry) List(ctx context.Context) ([]Object, error) {
	var objs []Object
	err := r.do(ctx, "list", r.Store.String(), func() (_ bool, err error) {
		objs, err = r.Store.List(ctx)
		return false, err
	})
	return objs, err
}

func (r *Retry) Stat(ctx context.Context, key string) (Object, error) {
	var obj Object
	err := r.do(ctx, "stat", key, func() (_ bool, err error) {
		obj, err = r.Store.Stat(ctx, key)
		return false, err
	})
	return obj, err
}

// ReadRange resumes a cut body where it stopped: a connection reset after
// 5 MiB of an 8 MiB part costs the last 3 MiB, not all 8. The ETag pin
// (If-Match) makes the pieces one version. An attempt that made progress
// does not count against Attempts; the Budget still bounds the whole call.
func (r *Retry) ReadRange(ctx context.Context, obj Object, off int64, p []byte) (int, error) {
	done := 0
	report := progressOf(ctx)
	err := r.do(ctx, "read", obj.Key, func() (progressed bool, err error) {
		actx := ctx
		if report != nil && done > 0 {
			base := done // bytes before this attempt's buffer are final already
			actx = WithProgress(ctx, func(n int) { report(base + n) })
		}
		n, err := r.Store.ReadRange(actx, obj, off+int64(done), p[done:])
		done += n
		switch {
		case err != nil && isEOF(err):
			return n > 0, eofSignal{err}
		case err != nil && done == len(p) && Retryable(err):
			return true, nil // every byte arrived; the failure came after
		}
		return n > 0, err
	})
	if e, ok := err.(eofSignal); ok {
		return done, e.err
	}
	return done, err
}

// eofSignal carries io.EOF (a successful short read) through do untouched.
type eofSignal struct{ err error }

func (e eofSignal) Error() string { return e.err.Error() }

// do runs call until it succeeds, fails for good, or the policy runs out.
// call reports whether it made progress; progress restarts the count of
// attempts (and the backoff), since the store is answering.
func (r *Retry) do(ctx context.Context, op, key string, call func() (progressed bool, err error)) error {
	start := time.Now()
	for attempt, failures := 1, 1; ; attempt, failures = attempt+1, failures+1 {
		progressed, err := call()
		if _, ok := err.(eofSignal); ok || err == nil || !Retryable(err) || ctx.Err() != nil {
			return err
		}
		if progressed {
			failures = 0 // the next attempt is the first of a new count
		}
		elapsed := time.Since(start)
		if failures >= r.policy.Attempts || (r.policy.Budget > 0 && elapsed >= r.policy.Budget) {
			return fmt.Errorf("%s %s: giving up after %d attempts in %s: %w", op, key, attempt, elapsed.Round(time.Millisecond), err)
		}
		delay := r.backoff(max(failures, 1))
		r.retries.Add(1)
		r.log.Warn("retrying", "op", op, "key", key, "attempt", attempt, "delay", delay, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w (last error: %w)", op, key, ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

// backoff is "full jitter": uniform in [0, min(MaxDelay, BaseDelay*2^n)).
func (r *Retry) backoff(attempt int) time.Duration {
	ceil := r.policy.BaseDelay << min(attempt-1, 20)
	if ceil > r.policy.MaxDelay || ceil <= 0 {
		ceil = r.policy.MaxDelay
	}
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil))) + time.Millisecond
}
