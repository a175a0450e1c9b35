//go:build e2e

package test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestSmallCacheServesEveryByteOnEveryPass: a ring far smaller than the
// large shard, with every read answered by the daemon (--page-cache
// direct), serves the shard's own bytes on every pass. Read-ahead runs
// past the ring, so parts are written while all of its slots are pinned by
// other writes and reads; a block that found no slot must be skipped, not
// written over another block's slot. Every object is read three times, the
// large shard also by two readers at once, and compared byte for byte with
// the source.
func TestSmallCacheServesEveryByteOnEveryPass(t *testing.T) {
	t.Parallel()
	const cacheSize = 64 << 20
	m := mountShardfs(t, e2e.source(), append(cacheFlags(t.TempDir(), "64MiB"), "--page-cache", "direct")...)
	large, ok := lookup(e2e.objects, largeKey)
	if !ok {
		t.Fatalf("%s is not in the data set", largeKey)
	}
	want, err := os.ReadFile(filepath.Join(e2e.data, filepath.FromSlash(largeKey)))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(want)) != large.size || large.size <= 2*cacheSize {
		t.Fatalf("%s is %d bytes here, %d listed; want over twice the %d-byte cache", largeKey, len(want), large.size, cacheSize)
	}

	for pass := 1; pass <= 3; pass++ {
		checkShards(t, m.dir, e2e.objects)
		readers := 1 + min(pass-1, 1) // the first pass alone, then two at once
		errs := make([]error, readers)
		var wg sync.WaitGroup
		for i := range readers {
			wg.Go(func() { errs[i] = compareWhole(m.path(largeKey), want) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("pass %d, reader %d of %d: %v", pass, i+1, readers, err)
			}
		}
		if t.Failed() {
			break
		}
	}
	// The ring's share of the cache is at most half of it (the default
	// --whole-shard-percent keeps the other half for whole files).
	if got := mountStats(t, m.dir)["cache_ring_bytes"]; got > cacheSize/2 {
		t.Errorf("the ring reports %v bytes of blocks, more than its %d-byte share of the cache", got, cacheSize/2)
	}
}

// compareWhole reads path in 1 MiB reads and compares every byte with want,
// naming the first block that differs and the block of want it holds, if
// any.
func compareWhole(path string, want []byte) error {
	const block = 1 << 20
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, block)
	var off int64
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			end := off + int64(n)
			if end > int64(len(want)) {
				return fmt.Errorf("%s is longer than its %d bytes", path, len(want))
			}
			if !bytes.Equal(buf[:n], want[off:end]) {
				return fmt.Errorf("%s: wrong bytes in [%d, %d) (block %d), which hold block %d of the source",
					path, off, end, off/block, sourceBlock(want, buf[:n], block))
			}
			off = end
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			if off != int64(len(want)) {
				return fmt.Errorf("%s ends at %d, want %d bytes", path, off, len(want))
			}
			return nil
		default:
			return fmt.Errorf("%s at %d: %w", path, off, err)
		}
	}
}

// sourceBlock returns the index of the block of want that starts with got's
// first bytes, or -1.
func sourceBlock(want, got []byte, block int) int {
	head := got[:min(len(got), 4096)]
	for i := 0; i < len(want); i += block {
		if bytes.HasPrefix(want[i:], head) {
			return i / block
		}
	}
	return -1
}
