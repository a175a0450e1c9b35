package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// Backend is what the conformance suite needs from a backend under test:
// a fresh, empty store and a way to write objects behind its back.
type Backend struct {
	// New returns an empty store and a function that writes (or
	// overwrites) one object in it.
	New func(t *testing.T) (s store.Store, put func(key string, data []byte))
}

// Run checks the contract of store.Store that every backend must keep.
func Run(t *testing.T, b Backend) {
	ctx := context.Background()
	fill := func(n int, seed int64) []byte {
		p := make([]byte, n)
		rand.New(rand.NewSource(seed)).Read(p)
		return p
	}

	t.Run("ListSortedWithSizes", func(t *testing.T) {
		s, put := b.New(t)
		want := map[string][]byte{
			"b.tar":              fill(1000, 1),
			"a/x.tar":            fill(3, 2),
			"a/y/z with space ü": fill(70000, 3),
			"empty":              {},
		}
		for k, v := range want {
			put(k, v)
		}
		objs, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != len(want) {
			t.Fatalf("listed %d objects, want %d: %+v", len(objs), len(want), objs)
		}
		for i, o := range objs {
			if i > 0 && objs[i-1].Key >= o.Key {
				t.Errorf("listing not sorted: %q before %q", objs[i-1].Key, o.Key)
			}
			data, ok := want[o.Key]
			if !ok {
				t.Errorf("unexpected key %q", o.Key)
				continue
			}
			if o.Size != int64(len(data)) {
				t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(data))
			}
			if o.ETag == "" {
				t.Errorf("%s: empty etag", o.Key)
			}
			st, err := s.Stat(ctx, o.Key)
			if err != nil || st.ETag != o.ETag || st.Size != o.Size {
				t.Errorf("%s: stat %+v, %v; listed %+v", o.Key, st, err, o)
			}
		}
	})

	t.Run("ReadRangeBytes", func(t *testing.T) {
		s, put := b.New(t)
		data := fill(3<<20+17, 4)
		put("shard.tar", data)
		obj, err := s.Stat(ctx, "shard.tar")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct{ off, n int64 }{{0, 1}, {0, 1 << 20}, {12345, 65536}, {int64(len(data)) - 10, 10}, {1 << 20, 2 << 20}} {
			p := make([]byte, r.n)
			n, err := s.ReadRange(ctx, obj, r.off, p)
			if err != nil || int64(n) != r.n {
				t.Fatalf("ReadRange(%d, %d) = %d, %v", r.off, r.n, n, err)
			}
			if !bytes.Equal(p, data[r.off:r.off+r.n]) {
				t.Fatalf("ReadRange(%d, %d): wrong bytes", r.off, r.n)
			}
		}
	})

	t.Run("ReadPastEndIsEOF", func(t *testing.T) {
		s, put := b.New(t)
		data := fill(100, 5)
		put("k", data)
		obj, _ := s.Stat(ctx, "k")
		p := make([]byte, 64)
		n, err := s.ReadRange(ctx, obj, 60, p)
		if n != 40 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:n], data[60:]) {
			t.Fatalf("ReadRange past end = %d, %v; want 40, io.EOF", n, err)
		}
	})

	t.Run("ChangedObjectIsErrChanged", func(t *testing.T) {
		s, put := b.New(t)
		put("k", fill(4096, 6))
		obj, _ := s.Stat(ctx, "k")
		put("k", fill(4096, 7))
		_, err := s.ReadRange(ctx, obj, 0, make([]byte, 100))
		if !errors.Is(err, store.ErrChanged) {
			t.Fatalf("read of replaced object: %v, want ErrChanged", err)
		}
	})

	t.Run("MissingIsErrNotFound", func(t *testing.T) {
		s, _ := b.New(t)
		_, err := s.Stat(ctx, "nope")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("stat missing: %v, want ErrNotFound", err)
		}
		if store.Retryable(err) {
			t.Fatalf("ErrNotFound must not be retryable")
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s, put := b.New(t)
		put("k", fill(1<<20, 8))
		obj, _ := s.Stat(ctx, "k")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.ReadRange(cctx, obj, 0, make([]byte, 1<<20)); err == nil {
			t.Fatalf("read with cancelled context succeeded")
		}
	})
}
