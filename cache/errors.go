package cache

import (
	"errors"

	"github.com/shardfs/shardfs/cache/arena"
	"github.com/shardfs/shardfs/cache/cachedir"
)

var (
	// ErrNotCached: a lease asked for a range whose blocks are not all in the ring.
	ErrNotCached = errors.New("range not in the cache ring")
	// ErrLocked: another process owns the cache directory. The wrapping
	// error names the holder's pid.
	ErrLocked = cachedir.ErrLocked
	// ErrSharedMemory: Open could not make the shared RAM tier
	// (Config.SharedMemoryDir): a full or missing directory, a mapping
	// refused.
	ErrSharedMemory = arena.ErrSharedMemory
)
