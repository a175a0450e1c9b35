package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseSize reads sizes such as "8MiB", "8M", "1.5GiB", "4096" (bytes).
// Decimal (KB, MB, GB) and binary (KiB, MiB, GiB, K, M, G) units are both
// accepted; a bare K/M/G/T is binary, as in dd and most storage tools.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (examples: 4096, 8MiB, 10GiB)", s)
	}
	mult, ok := unitMultiplier(strings.ToLower(unit))
	if !ok {
		return 0, fmt.Errorf("%q has an unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s, unit)
	}
	return int64(v * float64(mult)), nil
}

func unitMultiplier(unit string) (int64, bool) {
	switch unit {
	case "", "b":
		return 1, true
	case "k", "ki", "kib":
		return 1 << 10, true
	case "m", "mi", "mib":
		return 1 << 20, true
	case "g", "gi", "gib":
		return 1 << 30, true
	case "t", "ti", "tib":
		return 1 << 40, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	}
	return 0, false
}

// formatSize prints a byte count for people.
func formatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
