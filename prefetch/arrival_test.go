package prefetch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/store"
)

// trickleFetcher delivers the first `first` bytes of every GET at once,
// reports them, then holds the rest until release is closed.
type trickleFetcher struct {
	first     int
	release   chan struct{}
	gets      atomic.Int64
	cancelled atomic.Int64
	mu        sync.Mutex
	offs      []int64 // where each GET started
}

func (f *trickleFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	f.gets.Add(1)
	f.mu.Lock()
	f.offs = append(f.offs, off)
	f.mu.Unlock()
	n := min(f.first, len(p))
	fillPattern(p[:n], obj, off)
	store.ReportProgress(ctx, n)
	select {
	case <-f.release:
	case <-ctx.Done():
		f.cancelled.Add(1)
		return n, ctx.Err()
	}
	fillPattern(p, obj, off)
	return len(p), nil
}

// TestReadIsServedFromThePartOfAPartThatArrived: a read inside the bytes
// of a part that have arrived returns while its GET still runs, and a read
// past them waits for them. It runs in a synctest bubble: once every
// goroutine waits, a read that has not returned is one that waits for
// bytes only the fetcher's release brings.
func TestReadIsServedFromThePartOfAPartThatArrived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		f := &trickleFetcher{first: 2 << 10, release: make(chan struct{})}
		s := newTestEngine(t, smallConfig(), f, nil)
		obj := fakeObject("trickle", 1<<20)
		st := s.Open(obj)
		defer st.Close()

		// The first 2 KiB of the first part are in: a read inside them
		// returns while the GET is still running.
		if err := readCheck(ctx, st, obj, make([]byte, 1000), 0); err != nil {
			t.Fatal(err)
		}
		// A read past what arrived waits for it.
		done := make(chan error, 1)
		go func() { done <- readCheck(ctx, st, obj, make([]byte, 1000), 1500) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a read past the arrived bytes returned (%v) before they arrived", err)
		default:
		}
		close(f.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestACancelledPartIsRefetchedNotServedPastWhatArrived(t *testing.T) {
	ctx := testContext(t)
	f := &trickleFetcher{first: 2 << 10, release: make(chan struct{})}
	s := newTestEngine(t, smallConfig(), f, nil)
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

// TestRandomReaderKeepsAPartItReadWhileItArrives: a random read served
// from the first bytes of its part must not cancel the part's GET: the
// next request of the same large read (the kernel splits them) follows
// into the same part. It runs in a synctest bubble, so that the second
// read is waiting on the part, still arriving, when its GET is let finish.
func TestRandomReaderKeepsAPartItReadWhileItArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		f := &trickleFetcher{first: 2 << 10, release: make(chan struct{})}
		cfg := smallConfig()
		s := newTestEngine(t, cfg, f, nil)
		obj := fakeObject("random", 1<<20)
		st := s.Open(obj)
		defer st.Close()
		off := 10 * cfg.BlockSize // not 0: the handle starts random
		if err := readCheck(ctx, st, obj, make([]byte, 1000), off); err != nil {
			t.Fatal(err)
		}
		if st.policy.Sequential() {
			t.Fatal("a first read away from 0 was taken as sequential")
		}
		done := make(chan error, 1)
		go func() { done <- readCheck(ctx, st, obj, make([]byte, 2000), off+1000) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a read past the arrived bytes returned (%v) before they arrived", err)
		default:
		}
		close(f.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if c := f.cancelled.Load(); c != 0 {
			t.Fatalf("%d GETs cancelled, want 0", c)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if fmt.Sprint(f.offs) != fmt.Sprint([]int64{off, off + cfg.BlockSize}) {
			t.Fatalf("GETs at %v, want one for the block read and one for the block after", f.offs)
		}
	})
}

// TestReadAheadWaitsForTheFirstBytesOfTheRead: while a read waits for the
// first bytes of its GET, the read-ahead behind it sends no GET to compete
// with that response; a read that reaches the deferred block starts its GET
// at once; nothing is fetched twice.
func TestReadAheadWaitsForTheFirstBytesOfTheRead(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{hold: make(chan struct{}), holdIf: func(_ store.Object, off int64) bool { return off == 0 }}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("a", 64<<10)
	st := s.Open(obj)
	defer st.Close()
	waiting := make(chan struct{}, 4)
	s.onPartWait = func() { waiting <- struct{}{} }
	first := make(chan error, 1)
	go func() { first <- readCheck(ctx, st, obj, make([]byte, 4096), 0) }()
	<-waiting
	if n := s.Stats().Running; n != 1 {
		t.Fatalf("%d GETs running while the first read waits for its first bytes, want 1", n)
	}
	if err := readCheck(ctx, st, obj, make([]byte, 4096), 4096); err != nil {
		t.Fatalf("read of the deferred block: %v", err)
	}
	close(f.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if a, b := f.getsAt("a", 0), f.getsAt("a", 4096); a != 1 || b != 1 {
		t.Fatalf("GETs at 0 and 4096: %d and %d, want one each", a, b)
	}
}

// TestReadAheadStartsOnTheFirstBytes: the deferred read-ahead starts as
// soon as the read's GET delivers its first bytes, not when it ends. In a
// synctest bubble, once every goroutine waits, the read-ahead's GET has
// started or never will before the first GET ends.
func TestReadAheadStartsOnTheFirstBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		f := &trickleFetcher{first: 1024, release: make(chan struct{})}
		s := newTestEngine(t, smallConfig(), f, nil)
		obj := fakeObject("a", 64<<10)
		st := s.Open(obj)
		defer st.Close()
		if err := readCheck(ctx, st, obj, make([]byte, 1024), 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := f.gets.Load(); n < 2 {
			t.Fatalf("%d GETs: the read-ahead did not start while the first GET was still arriving", n)
		}
		close(f.release)
	})
}
