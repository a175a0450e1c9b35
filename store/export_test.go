package store

// ErrStalled lets the external tests tell a stall from other failures.
var ErrStalled = errStalled
