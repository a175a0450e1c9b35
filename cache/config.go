package cache

import "fmt"

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

	// alignment is the unit of direct I/O: block sizes, slot offsets and
	// buffers are multiples of it.
	alignment int64 = 4096
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
	BlockSize  int64  // bytes per block, a multiple of 4 KiB
	Namespace  string // the source, e.g. "s3://bucket/prefix"; part of every block's identity

	// SizeGiven says Size was asked for rather than defaulted. When it
	// was not, a ring already in Dir keeps its own size (a cache warmed
	// with another size is used, not emptied), and a new ring is made no
	// larger than 90% of what Dir's filesystem has free.
	SizeGiven bool
}

// DefaultConfig is a RAM-tier-only cache of the default sizes; set Dir for
// a ring.
func DefaultConfig() Config {
	return Config{Size: DefaultSize, MemorySize: DefaultMemorySize, BlockSize: DefaultBlockSize}
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
	}
	if c.Dir != "" {
		smallest := geometry{blockSize: c.BlockSize, slots: minSlots}.fileSize()
		if c.Size < smallest {
			return fmt.Errorf("cache size %d: must hold at least %d blocks of %d bytes (%d bytes with headers)",
				c.Size, minSlots, c.BlockSize, smallest)
		}
	}
	return nil
}
