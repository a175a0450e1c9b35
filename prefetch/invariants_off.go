//go:build !invariants

package prefetch

const invariants = false
