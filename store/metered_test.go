package store_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

// TestMeteredTellsCancelledFromFailed: a GET that fails while its caller
// waits is an error; one that ends because the caller cancelled (a handle
// closed under read-ahead) is counted as cancelled, not as a backend fault.
func TestMeteredTellsCancelledFromFailed(t *testing.T) {
	mem := storetest.NewMem()
	mem.Put("a", bytes.Repeat([]byte("x"), 4096))
	m := store.WithMetering(mem)
	obj, err := m.Stat(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}

	mem.Hook = func(string, int64, int) error { return errReset }
	if _, err := m.ReadRange(context.Background(), obj, 0, make([]byte, 10)); err == nil {
		t.Fatal("a GET the store failed returned no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	mem.Hook = func(string, int64, int) error { cancel(); return ctx.Err() }
	if _, err := m.ReadRange(ctx, obj, 0, make([]byte, 10)); err == nil {
		t.Fatal("a cancelled GET returned no error")
	}
	if e, c := m.C.Errors.Load(), m.C.Cancelled.Load(); e != 1 || c != 1 {
		t.Fatalf("errors %d, cancelled %d; want 1 and 1", e, c)
	}
}
