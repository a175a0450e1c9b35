package cache

import "errors"

var (
	// ErrNotCached: a lease asked for a range whose blocks are not all in the ring.
	ErrNotCached = errors.New("range not in the cache ring")
	// ErrLocked: another process owns the cache directory. The wrapping
	// error names the holder's pid.
	ErrLocked = errors.New("cache directory is locked by another process")
)
