//go:build invariants

package prefetch

// invariants turns on assertions of internal consistency that are too
// costly for production (`go test -tags invariants`).
const invariants = true
