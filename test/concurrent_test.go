//go:build e2e

package test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// readSHA256 reads path in chunks of the given size and returns the sha256
// of what it read.
func readSHA256(path string, chunk int) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, chunk))
	if err != nil {
		return "", n, fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// readConcurrently reads each (object, chunk size) pair in its own
// goroutine, all at once, and checks every byte.
func readConcurrently(t *testing.T, m *fgMount, objs []object, chunks []int) {
	t.Helper()
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum, n, err := readSHA256(m.path(o.key), chunks[i])
			switch {
			case err != nil:
				errs[i] = err
			case n != o.size || sum != o.sha256:
				errs[i] = fmt.Errorf("%s (reader %d, %d-byte reads): got %d bytes sha256 %s, want %d bytes %s",
					o.key, i, chunks[i], n, sum, o.size, o.sha256)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// sources are the two kinds of SOURCE, each holding the data set.
func sources() map[string]string {
	return map[string]string{"s3": e2e.source(), "local": e2e.data}
}

func TestTwoReadersOfOneFile(t *testing.T) {
	t.Parallel()
	for name, source := range sources() {
		t.Run(name, func(t *testing.T) {
			m := mountShardfs(t, source)
			large, _ := lookup(e2e.objects, largeKey)
			// Different read sizes put the two readers at different offsets.
			readConcurrently(t, m, []object{large, large}, []int{1 << 20, 100_000})
		})
	}
}

func TestEightReadersOfEightFiles(t *testing.T) {
	t.Parallel()
	for name, source := range sources() {
		t.Run(name, func(t *testing.T) {
			m := mountShardfs(t, source)
			shards := e2e.smallShards()[:8]
			chunks := []int{4096, 1 << 20, 65536, 131072, 12345, 1 << 20, 32768, 777}
			readConcurrently(t, m, shards, chunks)
		})
	}
}
