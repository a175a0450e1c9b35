package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/dustin/go-humanize"
)

// parseSize reads sizes such as "8MiB", "8M", "1.5GiB", "4096" (bytes).
// Binary units (KiB, MiB, GiB, TiB) and decimal ones (KB, MB, GB, TB) are
// both accepted; a bare K/M/G/T is binary, as in dd and most storage tools
// (go-humanize alone would read it as decimal).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if n := len(t); n > 0 && strings.ContainsRune("kKmMgGtT", rune(t[n-1])) {
		t += "i"
	}
	v, err := humanize.ParseBytes(t)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a size (examples: 4096, 8MiB, 10GiB)", s)
	}
	return int64(v), nil
}

// formatSize prints a byte count for people, in binary units ("8.0 MiB").
func formatSize(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
