package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
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
		puts := 0
		return s, func(key string, data []byte) {
			path := filepath.Join(dir, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			// Write a new file and rename it over the old one, as a
			// producer of shards would. Each put gets an mtime of its
			// own, so the version differs whatever the clock says (and
			// an inode number freed by the rename may come back).
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
			puts++
			mtime := time.Unix(1700000000, int64(puts))
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				t.Fatal(err)
			}
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
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	awaitCtimeTick(t, fi)
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

// awaitCtimeTick returns once the file system stamps changes with a ctime
// later than fi's, so that a change made afterwards gets a ctime of its
// own. ctime comes from the kernel's coarse clock, which ticks every few
// milliseconds: a fixed sleep could be too short, so this watches a probe
// file's ctime until it moves past fi's.
func awaitCtimeTick(t *testing.T, fi os.FileInfo) {
	t.Helper()
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for mode := os.FileMode(0o600); ; mode ^= 0o044 {
		if err := os.Chmod(probe, mode); err != nil { // a chmod stamps the ctime
			t.Fatal(err)
		}
		pi, err := os.Stat(probe)
		if err != nil {
			t.Fatal(err)
		}
		if ctime(pi) > ctime(fi) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func ctime(fi os.FileInfo) int64 { return fi.Sys().(*syscall.Stat_t).Ctim.Nano() }
