package store_test

import (
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
