package store

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// Counters are the backend figures an operator watches: how many requests,
// how many bytes, how many failed and how long reads took.
type Counters struct {
	Lists, Stats, GETs atomic.Int64
	BytesRead          atomic.Int64
	Errors             atomic.Int64
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
	objs, err := m.Store.List(ctx)
	m.count(err)
	return objs, err
}

func (m *Metered) Stat(ctx context.Context, key string) (Object, error) {
	m.C.Stats.Add(1)
	obj, err := m.Store.Stat(ctx, key)
	m.count(err)
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
		m.count(nil)
	} else {
		m.count(err)
	}
	if m.ObserveGET != nil {
		m.ObserveGET(d, n, err)
	}
	return n, err
}

func (m *Metered) count(err error) {
	if err != nil {
		m.C.Errors.Add(1)
	}
}
