package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

func TestLocalConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{New: func(t *testing.T) (store.Store, func(string, []byte)) {
		dir := t.TempDir()
		s, err := store.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s, func(key string, data []byte) {
			path := filepath.Join(dir, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			// Write a new file and rename it over the old one, as a
			// producer of shards would; bump mtime so the version differs
			// even within one clock tick.
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
			_ = os.Chtimes(path, time.Now(), time.Now().Add(time.Duration(len(data))))
		}
	}})
}

func TestMemConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{New: func(t *testing.T) (store.Store, func(string, []byte)) {
		m := storetest.NewMem()
		return m, m.Put
	}})
}

// A shard rewritten in place with its size and mtime put back (rsync
// --inplace -t, touch -r) is a new version: its ctime moved.
func TestLocalInPlaceRewriteWithMtimeRestoredIsAChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.tar")
	if err := os.WriteFile(path, []byte("first content"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := store.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	before, err := s.Stat(ctx, "a.tar")
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	time.Sleep(10 * time.Millisecond) // a ctime tick apart
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("other"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := s.Stat(ctx, "a.tar")
	if err != nil {
		t.Fatal(err)
	}
	if after.ETag == before.ETag {
		t.Fatalf("ETag %s unchanged after an in-place rewrite with mtime restored", after.ETag)
	}
	if _, err := s.ReadRange(ctx, before, 0, make([]byte, 5)); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("read of the old version: %v, want ErrChanged", err)
	}
}
