package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

var errReset = errors.New("connection reset by peer")

func fastPolicy(attempts int) store.RetryPolicy {
	return store.RetryPolicy{Attempts: attempts, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
}

func TestRetryRecoversFromTransientErrors(t *testing.T) {
	mem := storetest.NewMem()
	data := bytes.Repeat([]byte("shard"), 1000)
	mem.Put("a", data)
	failures := 3
	mem.Hook = func(string, int64, int) error {
		if failures > 0 {
			failures--
			return errReset
		}
		return nil
	}
	r := store.WithRetry(mem, fastPolicy(5), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	p := make([]byte, 100)
	if n, err := r.ReadRange(context.Background(), obj, 10, p); err != nil || n != 100 || !bytes.Equal(p, data[10:110]) {
		t.Fatalf("ReadRange = %d, %v", n, err)
	}
	if got := r.Retries(); got != 3 {
		t.Fatalf("retries = %d, want 3", got)
	}
}

func TestRetryGivesUpAndKeepsCause(t *testing.T) {
	mem := storetest.NewMem()
	mem.Put("a", []byte("x"))
	mem.Hook = func(string, int64, int) error { return errReset }
	r := store.WithRetry(mem, fastPolicy(3), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	_, err := r.ReadRange(context.Background(), obj, 0, make([]byte, 1))
	if !errors.Is(err, errReset) {
		t.Fatalf("err = %v, want wrapped reset", err)
	}
	if r.Retries() != 2 {
		t.Fatalf("retries = %d, want 2", r.Retries())
	}
}

// TestRetryOneAttempt: under WithOneAttempt a failing call is tried once
// and its error returned, and a store that answers is read as usual.
func TestRetryOneAttempt(t *testing.T) {
	mem := storetest.NewMem()
	mem.Put("a", []byte("shard"))
	failing := true
	calls := 0
	mem.Hook = func(string, int64, int) error {
		calls++
		if failing {
			return errReset
		}
		return nil
	}
	r := store.WithRetry(mem, fastPolicy(5), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	ctx := store.WithOneAttempt(context.Background())
	if _, err := r.ReadRange(ctx, obj, 0, make([]byte, 5)); !errors.Is(err, errReset) {
		t.Fatalf("err = %v, want the reset", err)
	}
	if calls != 1 || r.Retries() != 0 {
		t.Fatalf("%d attempts and %d retries under WithOneAttempt, want 1 and 0", calls, r.Retries())
	}
	failing = false
	p := make([]byte, 5)
	if n, err := r.ReadRange(ctx, obj, 0, p); err != nil || string(p[:n]) != "shard" {
		t.Fatalf("ReadRange = %q, %v", p[:n], err)
	}
}

func TestRetryDoesNotRetryPermanentErrors(t *testing.T) {
	for _, perm := range []error{store.ErrChanged, store.ErrNotFound, store.ErrDenied, store.ErrNoBucket} {
		mem := storetest.NewMem()
		mem.Put("a", []byte("x"))
		mem.Hook = func(string, int64, int) error { return fmt.Errorf("read a: %w", perm) }
		r := store.WithRetry(mem, fastPolicy(5), slog.New(slog.DiscardHandler))
		obj, _ := r.Stat(context.Background(), "a")
		if _, err := r.ReadRange(context.Background(), obj, 0, make([]byte, 1)); !errors.Is(err, perm) {
			t.Fatalf("err = %v, want %v", err, perm)
		}
		if r.Retries() != 0 {
			t.Fatalf("%v retried %d times", perm, r.Retries())
		}
	}
}

func TestRetryPassesEOFThrough(t *testing.T) {
	mem := storetest.NewMem()
	mem.Put("a", []byte("hello"))
	r := store.WithRetry(mem, fastPolicy(5), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	n, err := r.ReadRange(context.Background(), obj, 3, make([]byte, 10))
	if n != 2 || err != io.EOF {
		t.Fatalf("ReadRange past end = %d, %v; want 2, io.EOF", n, err)
	}
}

func TestRetryRetriesWrappedEOF(t *testing.T) {
	// A connection closed before the response reads as `Get "...": EOF`:
	// a transport failure, not the end of the object.
	mem := storetest.NewMem()
	data := []byte("0123456789")
	mem.Put("a", data)
	failures := 1
	mem.Hook = func(string, int64, int) error {
		if failures > 0 {
			failures--
			return fmt.Errorf(`Get "http://store/a": %w`, io.EOF)
		}
		return nil
	}
	r := store.WithRetry(mem, fastPolicy(3), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	p := make([]byte, 10)
	if n, err := r.ReadRange(context.Background(), obj, 0, p); err != nil || n != 10 || !bytes.Equal(p, data) {
		t.Fatalf("ReadRange = %d, %v; want the whole object after a retry", n, err)
	}
	if r.Retries() != 1 {
		t.Fatalf("retries = %d, want 1", r.Retries())
	}
}

func TestRetryResumesACutBody(t *testing.T) {
	// Every attempt is cut after 300 bytes: the read still completes, each
	// retry asks only for what is missing, and progress keeps the attempt
	// limit (3) from ending the read.
	mem := storetest.NewMem()
	data := make([]byte, 2000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mem.Put("a", data)
	var asked []int64
	mem.Cut = func(_ string, off int64, n int) (int, error) {
		asked = append(asked, off)
		if n > 300 {
			return 300, errReset
		}
		return 0, nil
	}
	r := store.WithRetry(mem, fastPolicy(3), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	p := make([]byte, 1500)
	n, err := r.ReadRange(context.Background(), obj, 100, p)
	if err != nil || n != 1500 || !bytes.Equal(p, data[100:1600]) {
		t.Fatalf("ReadRange = %d, %v; want 1500 bytes equal to the source", n, err)
	}
	want := []int64{100, 400, 700, 1000, 1300}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("attempts started at %v, want %v", asked, want)
	}
	if r.Retries() != 4 {
		t.Fatalf("retries = %d, want 4", r.Retries())
	}
}

func TestRetryCountsAttemptsWithoutProgress(t *testing.T) {
	// Progress then nothing: the limit applies to the attempts after the
	// last progress, and the bytes read so far are reported.
	mem := storetest.NewMem()
	mem.Put("a", make([]byte, 1000))
	first := true
	mem.Cut = func(string, int64, int) (int, error) {
		if first {
			first = false
			return 400, errReset
		}
		return 0, errReset
	}
	r := store.WithRetry(mem, fastPolicy(3), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	n, err := r.ReadRange(context.Background(), obj, 0, make([]byte, 1000))
	if !errors.Is(err, errReset) || n != 400 {
		t.Fatalf("ReadRange = %d, %v; want 400 and the reset", n, err)
	}
	if r.Retries() != 3 {
		t.Fatalf("retries = %d, want 3 (one after the progress, then two more)", r.Retries())
	}
}

func TestRetryReportsProgressAcrossAttempts(t *testing.T) {
	// Progress counts from the start of the caller's buffer, whichever
	// attempt delivered the bytes.
	mem := storetest.NewMem()
	mem.Put("a", make([]byte, 1000))
	cut := true
	mem.Cut = func(string, int64, int) (int, error) {
		if cut {
			cut = false
			return 600, errReset
		}
		return 0, nil
	}
	r := store.WithRetry(mem, fastPolicy(3), slog.New(slog.DiscardHandler))
	obj, _ := r.Stat(context.Background(), "a")
	var reports []int
	ctx := store.WithProgress(context.Background(), func(n int) { reports = append(reports, n) })
	if n, err := r.ReadRange(ctx, obj, 0, make([]byte, 1000)); n != 1000 || err != nil {
		t.Fatalf("ReadRange = %d, %v", n, err)
	}
	if fmt.Sprint(reports) != "[600 1000]" {
		t.Fatalf("progress reports %v, want [600 1000]", reports)
	}
}

// A read against a store that keeps failing ends when its budget does, not
// a backoff wait later: each wait is cut at the deadline. The waits (up to
// 4 s) dwarf the budget (200 ms), so an uncut wait would end every read
// past it. The reads run in a synctest bubble, whose clock moves only
// while they wait, so each read's length is exact and the load of the
// machine has no part in it.
func TestRetryEndsWithItsBudgetNotAWaitLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storetest.NewMem()
		mem.Put("a", []byte("x"))
		mem.Hook = func(string, int64, int) error { return errReset }
		policy := store.RetryPolicy{Attempts: 100, BaseDelay: 2 * time.Second, MaxDelay: 4 * time.Second, Budget: 200 * time.Millisecond}
		r := store.WithRetry(mem, policy, slog.New(slog.DiscardHandler))
		obj, _ := r.Stat(context.Background(), "a")
		type result struct {
			took time.Duration
			err  error
		}
		results := make(chan result, 10)
		for range 10 { // each with its own draw of waits
			go func() {
				start := time.Now()
				_, err := r.ReadRange(context.Background(), obj, 0, make([]byte, 1))
				results <- result{time.Since(start), err}
			}()
		}
		for range 10 { // every read is waited for, so none outlives the bubble
			res := <-results
			if !errors.Is(res.err, errReset) {
				t.Errorf("err = %v, want the store's reset after the budget", res.err)
			}
			if res.took > policy.Budget {
				t.Errorf("a read with a %v retry budget failed after %v; want it back by the budget", policy.Budget, res.took)
			}
		}
		if r.Retries() == 0 {
			t.Fatal("no read was retried within its budget")
		}
	})
}
