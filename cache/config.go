package cache

import "fmt"

// Defaults for the flags that fill a Config.
const (
	DefaultSize       int64 = 10 << 30
	DefaultMemorySize int64 = 512 << 20
	DefaultBlockSize  int64 = 1 << 20

	// alignment is the unit of direct I/O: block sizes, slot offsets and
	// buffers are multiples of it.
	alignment int64 = 4096
	// maxBlockSize bounds one block; larger blocks would make every random
	// read pay for a huge CRC check.
	maxBlockSize int64 = 256 << 20
)

// Config describes one cache.
type Config struct {
	Dir        string // ring directory; "" = RAM tier only
	Size       int64  // ring bytes, never exceeded by the ring's files; 0 = DefaultSize
	MemorySize int64  // RAM tier bytes; 0 disables the RAM tier (flags default to DefaultMemorySize)
	BlockSize  int64  // bytes per block, a multiple of 4 KiB; 0 = DefaultBlockSize
	Namespace  string // the source, e.g. "s3://bucket/prefix"; part of every block's identity
}

// WithDefaults fills Size and BlockSize when they are zero. MemorySize is
// left alone because zero is how the RAM tier is turned off.
func (c Config) WithDefaults() Config {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	return c
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
