package prefetch

import (
	"context"
	"testing"
	"time"

	"github.com/shardfs/shardfs/store"
)

// trickleFetcher delivers the first `first` bytes of every GET at once,
// reports them, then holds the rest until release is closed.
type trickleFetcher struct {
	first   int
	release chan struct{}
}

func (f *trickleFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	n := min(f.first, len(p))
	fillPattern(p[:n], obj, off)
	store.ReportProgress(ctx, n)
	select {
	case <-f.release:
	case <-ctx.Done():
		return n, ctx.Err()
	}
	fillPattern(p, obj, off)
	return len(p), nil
}

func TestReadIsServedFromThePartOfAPartThatArrived(t *testing.T) {
	ctx := testContext(t)
	f := &trickleFetcher{first: 2 << 10, release: make(chan struct{})}
	s := newTestScheduler(t, smallConfig(), f, nil)
	obj := fakeObject("trickle", 1<<20)
	st := s.Open(obj)
	defer st.Close()

	// The first 2 KiB of the first part are in: a read inside them returns
	// while the GET is still running.
	if err := readCheck(ctx, st, obj, make([]byte, 1000), 0); err != nil {
		t.Fatal(err)
	}
	// A read past what arrived waits for it.
	done := make(chan error, 1)
	go func() { done <- readCheck(ctx, st, obj, make([]byte, 1000), 1500) }()
	select {
	case err := <-done:
		t.Fatalf("a read past the arrived bytes returned (%v) before they arrived", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(f.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestACancelledPartIsRefetchedNotServedPastWhatArrived(t *testing.T) {
	ctx := testContext(t)
	f := &trickleFetcher{first: 2 << 10, release: make(chan struct{})}
	s := newTestScheduler(t, smallConfig(), f, nil)
	obj := fakeObject("cut", 1<<20)
	st := s.Open(obj)
	if err := readCheck(ctx, st, obj, make([]byte, 1000), 0); err != nil {
		t.Fatal(err)
	}
	// Closing the stream cancels its GETs: a new stream's read of bytes
	// that never arrived must fail or refetch, never return garbage.
	st.Close()
	st2 := s.Open(obj)
	defer st2.Close()
	close(f.release)
	if err := readCheck(ctx, st2, obj, make([]byte, 3000), 1000); err != nil {
		t.Fatal(err)
	}
}
