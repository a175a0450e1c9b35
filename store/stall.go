package store

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// errStalled is the cause given when a request gets no response, or its
// body yields no byte, for the stall timeout. It is retryable: a fresh GET
// usually gets a healthy connection.
var errStalled = errors.New("stalled")

// stallWatch cancels a request that makes no progress: armed when the
// request starts, re-armed around every Read of its body.
type stallWatch struct {
	timeout time.Duration
	mu      sync.Mutex
	timer   *time.Timer
}

func newStallWatch(timeout time.Duration, cancel context.CancelCauseFunc) *stallWatch {
	return &stallWatch{timeout: timeout, timer: time.AfterFunc(timeout, func() { cancel(errStalled) })}
}

// reader wraps a body so that each Read must start delivering within the
// timeout.
func (w *stallWatch) reader(r io.Reader) io.Reader { return stallReader{r: r, w: w} }

func (w *stallWatch) rearm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Reset(w.timeout)
}

// stop disarms the watch for good.
func (w *stallWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
}

type stallReader struct {
	r io.Reader
	w *stallWatch
}

func (s stallReader) Read(p []byte) (int, error) {
	s.w.rearm()
	n, err := s.r.Read(p)
	if n > 0 {
		s.w.rearm()
	}
	return n, err
}
