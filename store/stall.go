package store

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// errStalled is the cause given when a body yields no byte for the stall
// timeout. It is retryable: a fresh GET usually gets a healthy connection.
var errStalled = errors.New("body stalled")

// stallReader cancels a request whose body stops delivering bytes. A
// timer is armed before each Read and disarmed when the Read returns.
type stallReader struct {
	r       io.Reader
	timeout time.Duration
	cancel  context.CancelCauseFunc

	mu    sync.Mutex
	timer *time.Timer
}

func newStallReader(r io.Reader, timeout time.Duration, cancel context.CancelCauseFunc) *stallReader {
	return &stallReader{r: r, timeout: timeout, cancel: cancel}
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	if s.timer == nil {
		s.timer = time.AfterFunc(s.timeout, func() { s.cancel(errStalled) })
	} else {
		s.timer.Reset(s.timeout)
	}
	s.mu.Unlock()
	n, err := s.r.Read(p)
	s.mu.Lock()
	s.timer.Stop()
	s.mu.Unlock()
	return n, err
}

// stop disarms the timer for good.
func (s *stallReader) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
}
