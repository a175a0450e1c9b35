package cache

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/shardfs/shardfs/cache/internal/aligned"
)

// Defaults of a Config; the command's flags show and use these.
const (
	DefaultSize int64 = 10 << 30
	// DefaultMemorySize is sized for a training node (tens to hundreds of
	// GiB): 1 GiB holds the blocks of 16 shards of 64 MiB that a
	// map-style epoch reads in shuffled order, so that each block is read
	// from the ring once per epoch rather than once per sample (samples
	// of ~100 KiB: ten a block). Only random readers put blocks here
	// (sequential ones read from their parts and the page cache), so the
	// tier fills only as far as random reads need it. It comes on top of
	// the read-ahead budget (prefetch.DefaultMemory): the daemon holds
	// at most the two plus its own room (cmd/shardfs followMemoryLimit).
	DefaultMemorySize int64 = 1 << 30
	DefaultBlockSize  int64 = 1 << 20
	// DefaultWholeShardPercent is the share of Size kept for whole-shard
	// files (package wholefile). Half: a warmed data set that fits in half the
	// cache is held both as ring blocks (random reads, GPU leases, reads
	// when passthrough is off) and as files the kernel reads itself.
	DefaultWholeShardPercent = 50
	// maxWholeShardPercent leaves the ring room for the random readers and
	// partly read shards that whole files cannot serve.
	maxWholeShardPercent = 90

	// alignment is the unit of direct I/O: block sizes, slot offsets and
	// buffers are multiples of it.
	alignment int64 = aligned.Size
	// maxBlockSize bounds one block; larger blocks would make every random
	// read pay for a huge CRC check.
	maxBlockSize int64 = 256 << 20
)

// Config describes one cache. Start from DefaultConfig: a zero field means
// "off" where the tier can be off ("" Dir: no ring; 0 MemorySize: no RAM
// tier) and is rejected by Validate where it cannot.
type Config struct {
	Dir        string // ring directory; "" = RAM tier only
	Size       int64  // ring bytes, never exceeded by the ring's files
	MemorySize int64  // RAM tier bytes; 0 disables the RAM tier
	// SharedMemoryDir, when set, puts the RAM tier's blocks in one file
	// there (a tmpfs: /dev/shm) that GPU clients lease and map (package arena),
	// instead of on the Go heap. The file is reserved whole at Open.
	SharedMemoryDir string
	BlockSize       int64 // bytes per block, a multiple of 4 KiB
	// Namespace and KeyPrefix place the source's objects: a block's
	// identity is Namespace, KeyPrefix + the object's key (as the store
	// lists it, relative to the source) and its ETag. For s3://bucket/wds
	// they are "s3://bucket/" and "wds/", so a ring warmed from the whole
	// bucket serves a mount of the prefix, and the other way round.
	Namespace string
	KeyPrefix string // "" or ends with "/"

	// WholeShardPercent is the share of Size kept for whole-shard files
	// (CACHE_DIR/shards); the ring gets the rest. 0: no whole files.
	// Ring and files together never exceed Size.
	WholeShardPercent int

	// SizeGiven says Size was asked for rather than defaulted. When it
	// was not, a ring already in Dir keeps its own size (a cache warmed
	// with another size is used, not emptied), and a new ring is made no
	// larger than 90% of what Dir's filesystem has free.
	SizeGiven bool
}

// DefaultConfig is a RAM-tier-only cache of the default sizes; set Dir for
// a ring.
func DefaultConfig() Config {
	return Config{Size: DefaultSize, MemorySize: DefaultMemorySize, BlockSize: DefaultBlockSize, WholeShardPercent: DefaultWholeShardPercent}
}

// Validate rejects sizes that cannot describe a cache, with one message
// naming the offending value.
func (c Config) Validate() error {
	switch {
	case c.BlockSize <= 0 || c.BlockSize%alignment != 0:
		return fmt.Errorf("cache block size %d: must be a positive multiple of %d bytes", c.BlockSize, alignment)
	case c.BlockSize > maxBlockSize:
		return fmt.Errorf("cache block size %d: must be at most %d bytes", c.BlockSize, maxBlockSize)
	case c.MemorySize < 0:
		return fmt.Errorf("memory cache size %d: must not be negative", c.MemorySize)
	case c.Size < 0:
		return fmt.Errorf("cache size %d: must not be negative", c.Size)
	case c.WholeShardPercent < 0 || c.WholeShardPercent > maxWholeShardPercent:
		return fmt.Errorf("whole-shard share %d%%: must be 0 to %d", c.WholeShardPercent, maxWholeShardPercent)
	case c.SharedMemoryDir != "" && !filepath.IsAbs(c.SharedMemoryDir):
		return fmt.Errorf("shared memory cache dir %q: must be an absolute path", c.SharedMemoryDir)
	case c.KeyPrefix != "" && !strings.HasSuffix(c.KeyPrefix, "/"):
		return fmt.Errorf("cache key prefix %q: must be empty or end with /", c.KeyPrefix)
	}
	if c.Dir != "" {
		smallest := geometry{blockSize: c.BlockSize, slots: minSlots}.fileSize()
		if c.ringSize() < smallest {
			return fmt.Errorf("cache size %d: its ring (%d%% of it) must hold at least %d blocks of %d bytes (%d bytes with headers)",
				c.Size, 100-c.WholeShardPercent, minSlots, c.BlockSize, smallest)
		}
	}
	return nil
}

// ringSize is the part of Size the ring may use.
func (c Config) ringSize() int64 { return ringShare(c.Size, c.WholeShardPercent) }

// ringShare is the ring's part of size bytes when percent go to whole files.
func ringShare(size int64, percent int) int64 { return size / 100 * int64(100-percent) }

// sizeForRing is the smallest Size whose ring share is ringBytes.
func sizeForRing(ringBytes int64, percent int) int64 {
	return (ringBytes + int64(100-percent) - 1) / int64(100-percent) * 100
}

// wholeQuota is the bytes whole files may use beside a ring file of
// ringBytes: the same share of the total the ring was sized from, so that
// a ring that kept its own size (SizeGiven false) keeps the split too.
func wholeQuota(ringBytes int64, percent int) int64 {
	return ringBytes / int64(100-percent) * int64(percent)
}
