package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
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
