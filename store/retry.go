package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy bounds how long one call may keep retrying.
type RetryPolicy struct {
	Attempts  int           // total attempts per call, at least 1
	BaseDelay time.Duration // first backoff; doubles per attempt
	MaxDelay  time.Duration // cap of one backoff
	Budget    time.Duration // a call gives up once this much time has passed (0 = Attempts only)
}

// Validate rejects a policy that cannot run, naming the field.
func (p RetryPolicy) Validate() error {
	switch {
	case p.Attempts < 1:
		return fmt.Errorf("retry attempts %d: must be at least 1", p.Attempts)
	case p.BaseDelay < 0 || p.MaxDelay < 0:
		return fmt.Errorf("retry delays %s, %s: must not be negative", p.BaseDelay, p.MaxDelay)
	case p.Budget < 0:
		return fmt.Errorf("retry timeout %s: must not be negative", p.Budget)
	}
	return nil
}

// delays is the policy's backoff: "full jitter", uniform in
// [0, min(MaxDelay, BaseDelay*2^n)). The library spreads each interval by
// ±RandomizationFactor, so a factor of 1 around half the ceiling is
// exactly that range. Attempts and Budget are counted by Retry.do, which
// also restarts the sequence when an attempt made progress.
func (p RetryPolicy) delays() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.BaseDelay / 2
	b.MaxInterval = p.MaxDelay / 2
	b.Multiplier = 2
	b.RandomizationFactor = 1
	b.MaxElapsedTime = 0
	b.Reset()
	return b
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

type oneAttemptKey struct{}

// WithOneAttempt returns ctx under which Retry makes a single attempt of
// each call and returns its failure as it is, with no backoff: the caller
// knows the same call just failed after a whole retry budget, and one more
// budget would only delay the error (the kernel reading a failed page
// again), while a store that is back answers the one attempt.
func WithOneAttempt(ctx context.Context) context.Context {
	return context.WithValue(ctx, oneAttemptKey{}, true)
}

func oneAttempt(ctx context.Context) bool {
	one, _ := ctx.Value(oneAttemptKey{}).(bool)
	return one
}

// withinBudget ends a backoff's waits at the call's deadline: a wait that
// would run past it is cut to end there, so the last attempt starts by
// the deadline and its failure ends the call. Uncut, a 5 s wait begun just
// before the budget ran out delayed EIO by up to 5 s past --retry-timeout.
type withinBudget struct {
	*backoff.ExponentialBackOff
	deadline time.Time
}

func (b withinBudget) NextBackOff() time.Duration {
	d := b.ExponentialBackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	return max(0, min(d, time.Until(b.deadline)))
}

// eofSignal carries io.EOF (a successful short read) through do untouched.
type eofSignal struct{ err error }

func (e eofSignal) Error() string { return e.err.Error() }

// do runs call until it succeeds, fails for good, or the policy runs out.
// call reports whether it made progress; progress restarts the count of
// attempts (and the backoff), since the store is answering.
func (r *Retry) do(ctx context.Context, op, key string, call func() (progressed bool, err error)) error {
	start := time.Now()
	delays := r.policy.delays()
	attempt, failures := 0, 0
	var last error
	var waits backoff.BackOff = delays
	if r.policy.Budget > 0 {
		waits = withinBudget{delays, start.Add(r.policy.Budget)}
	}
	err := backoff.RetryNotify(func() error {
		attempt++
		failures++
		progressed, err := call()
		if _, ok := err.(eofSignal); ok || err == nil || !Retryable(err) || ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		last = err
		if progressed {
			failures = 0 // the next attempt is the first of a new count
			delays.Reset()
		}
		elapsed := time.Since(start)
		if failures >= r.policy.Attempts || (r.policy.Budget > 0 && elapsed >= r.policy.Budget) || oneAttempt(ctx) {
			return backoff.Permanent(fmt.Errorf("%s %s: giving up after %d attempts in %s: %w", op, key, attempt, elapsed.Round(time.Millisecond), err))
		}
		return err
	}, backoff.WithContext(waits, ctx), func(err error, delay time.Duration) {
		r.retries.Add(1)
		r.log.Warn("retrying", "op", op, "key", key, "attempt", attempt, "delay", delay, "err", err)
	})
	if last != nil && err != nil && errors.Is(err, ctx.Err()) && !errors.Is(err, last) {
		return fmt.Errorf("%s %s: %w (last error: %w)", op, key, err, last)
	}
	return err
}
