package wholefile

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWholeFileCheck is the cost of the check an open makes before
// it hands out a whole-shard file: checkWhole over a 128 MiB file, with
// the file in the page cache ("cached", as right after it was written or
// read) and with its pages dropped before each check ("uncached": the
// disk's read speed).
func BenchmarkWholeFileCheck(b *testing.B) {
	const size = 128 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	h := newSum()
	h.Write(data)
	rec := record{Size: size, Sum: h.Sum32()}
	path := filepath.Join(b.TempDir(), "whole")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, cached := range []bool{true, false} {
		name := "uncached"
		if cached {
			name = "cached"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if !cached {
					b.StopTimer()
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if reason := checkWhole(f, rec); reason != "" {
					b.Fatal(reason)
				}
			}
		})
	}
}
