package store

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// Counters are the backend figures an operator watches: how many requests,
// how many bytes, how many failed and how long reads took.
type Counters struct {
	Lists, Stats, GETs atomic.Int64
	ListRequests       atomic.Int64 // LIST requests (pages) the listings sent
	ListNanos          atomic.Int64 // summed duration of listings
	BytesRead          atomic.Int64
	Errors             atomic.Int64 // requests that failed, the caller still waiting
	Cancelled          atomic.Int64 // requests abandoned because the caller gave up (a handle closed)
	GETNanos           atomic.Int64 // summed latency of ranged GETs
}

// Metered wraps a Store and counts every call that reaches it. Placed
// under Retry it counts each attempt; that is what the backend sees.
type Metered struct {
	Store
	C Counters
	// ObserveGET, when set, receives each GET's latency and size.
	ObserveGET func(d time.Duration, n int, err error)
}

// WithMetering wraps s.
func WithMetering(s Store) *Metered { return &Metered{Store: s} }

func (m *Metered) List(ctx context.Context) ([]Object, error) {
	m.C.Lists.Add(1)
	start := time.Now()
	objs, err := m.Store.List(withListRequests(ctx, func() { m.C.ListRequests.Add(1) }))
	m.C.ListNanos.Add(int64(time.Since(start)))
	m.count(ctx, err)
	return objs, err
}

func (m *Metered) Stat(ctx context.Context, key string) (Object, error) {
	m.C.Stats.Add(1)
	obj, err := m.Store.Stat(ctx, key)
	m.count(ctx, err)
	return obj, err
}

func (m *Metered) ReadRange(ctx context.Context, obj Object, off int64, p []byte) (int, error) {
	m.C.GETs.Add(1)
	start := time.Now()
	n, err := m.Store.ReadRange(ctx, obj, off, p)
	d := time.Since(start)
	m.C.GETNanos.Add(int64(d))
	m.C.BytesRead.Add(int64(n))
	if err == io.EOF {
		m.count(ctx, nil)
	} else {
		m.count(ctx, err)
	}
	if m.ObserveGET != nil {
		m.ObserveGET(d, n, err)
	}
	return n, err
}

// count records a failed call as an error, or as cancelled when the caller's
// context was cancelled: a read-ahead GET dropped because its handle closed
// is not a fault of the backend.
func (m *Metered) count(ctx context.Context, err error) {
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.Canceled):
		m.C.Cancelled.Add(1)
	default:
		m.C.Errors.Add(1)
	}
}
