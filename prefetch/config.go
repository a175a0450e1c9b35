package prefetch

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// Defaults of a Config; the command's flags show and use these.
const (
	DefaultBlockSize     int64 = 1 << 20
	DefaultPartSize      int64 = 8 << 20
	DefaultMaxPrefetch   int64 = 256 << 20
	DefaultMemory        int64 = 1 << 30
	DefaultConcurrency         = 64
	DefaultNextShards          = 1
	DefaultReorderWindow int64 = 16 << 20
	DefaultHeadSize      int64 = 16 << 10
)

// Config sizes read-ahead. Start from DefaultConfig: a zero field means
// "off" where the setting can be off (NextShards, HeadSize, ReorderWindow)
// and is rejected by Validate where it cannot.
type Config struct {
	BlockSize   int64 // cache block; random reads fetch only the blocks they touch
	PartSize    int64 // ranged GET size for sequential reads, a multiple of BlockSize
	MaxPrefetch int64 // largest sequential window per stream
	Memory      int64 // global budget for bytes fetched or in flight but not yet consumed
	Concurrency int   // most GETs running at once across all streams
	NextShards  int   // objects after the current one to prefetch near its end; 0 disables

	// ReorderWindow is how far from the reader's front a read may land and
	// still count as sequential: the kernel's async read-ahead requests
	// arrive out of order across this span (the mount's read_ahead_kb).
	ReorderWindow int64

	// HeadSize: a part made for a read that wants no more than its first
	// HeadSize bytes is fetched in two GETs, that head first and the rest
	// on the object's next read. 0 disables. The default is the kernel's
	// first READ of a file read in small pieces (4 pages): on a
	// rate-limited link the smaller the response, the sooner its first
	// byte, so a head no larger than that first READ answers it soonest.
	HeadSize int64

	// DenseRandom: fetch the rest of an object that random reads use
	// densely (dense.go). Only worth it where a cache tier keeps what
	// arrives: with none, background parts would be fetched and dropped.
	DenseRandom bool

	// SkipLaggingSink: read-ahead blocks are not handed to the cache while
	// the parts it has yet to take hold more than half the budget
	// (source.go, sinkLagsLocked), so a cache disk slower than the network
	// never holds a stream to its pace. Readers that fill the cache
	// (Reader.FillCache) turn it off while they are open.
	SkipLaggingSink bool
}

// sinkLagShare: the parts waiting for the cache may hold 1/sinkLagShare of
// the budget before read-ahead skips it. Half leaves read-ahead the other
// half; a disk that keeps up drains what a burst of finished GETs
// brings (Concurrency parts at once) long before.
const sinkLagShare = 2

// DefaultConfig is the configuration a mount starts from.
func DefaultConfig() Config {
	return Config{
		BlockSize: DefaultBlockSize, PartSize: DefaultPartSize, MaxPrefetch: DefaultMaxPrefetch,
		Memory: DefaultMemory, Concurrency: DefaultConcurrency, NextShards: DefaultNextShards,
		ReorderWindow: DefaultReorderWindow, HeadSize: DefaultHeadSize, DenseRandom: true,
		SkipLaggingSink: true,
	}
}

// WithBlockSize sets the block size and, when the part size is no longer
// a multiple of it, the largest multiple under DefaultPartSize (at least
// one block).
func (c Config) WithBlockSize(bs int64) Config {
	c.BlockSize = bs
	if bs > 0 && c.PartSize%bs != 0 {
		c.PartSize = max(DefaultPartSize/bs, 1) * bs
	}
	return c
}

// Validate rejects sizes that cannot work together, with one message naming
// the offending values.
func (c Config) Validate() error {
	switch {
	case c.BlockSize <= 0:
		return fmt.Errorf("block size %s must be positive", formatSize(c.BlockSize))
	case c.PartSize <= 0:
		return fmt.Errorf("part size %s must be positive", formatSize(c.PartSize))
	case c.PartSize%c.BlockSize != 0:
		return fmt.Errorf("part size %s is not a multiple of block size %s", formatSize(c.PartSize), formatSize(c.BlockSize))
	case c.MaxPrefetch < c.BlockSize:
		return fmt.Errorf("max prefetch %s is smaller than block size %s", formatSize(c.MaxPrefetch), formatSize(c.BlockSize))
	case c.Memory < c.PartSize:
		return fmt.Errorf("prefetch memory %s is smaller than part size %s", formatSize(c.Memory), formatSize(c.PartSize))
	case c.Concurrency <= 0:
		return fmt.Errorf("prefetch concurrency %d must be positive", c.Concurrency)
	case c.ReorderWindow < 0:
		return fmt.Errorf("reorder window %s must not be negative", formatSize(c.ReorderWindow))
	case c.NextShards < 0:
		return fmt.Errorf("next shards %d must not be negative", c.NextShards)
	case c.HeadSize < 0:
		return fmt.Errorf("head size %s must not be negative", formatSize(c.HeadSize))
	}
	return nil
}

// chargeOf is the budget a part over r costs: whole blocks.
func (c Config) chargeOf(r Range) int64 { return ceilTo(r.Len(), c.BlockSize) }

// formatSize writes a size as the flags do ("8.0 MiB"); a negative one,
// which only an invalid config holds, as plain bytes.
func formatSize(n int64) string {
	if n < 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	return humanize.IBytes(uint64(n))
}
