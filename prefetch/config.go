package prefetch

import "fmt"

// Defaults for the flags that fill a Config.
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

// Config sizes read-ahead. Zero fields take the defaults in WithDefaults.
type Config struct {
	BlockSize   int64 // cache block; random reads fetch only the blocks they touch
	PartSize    int64 // ranged GET size for sequential reads, a multiple of BlockSize
	MaxPrefetch int64 // largest sequential window per stream
	Memory      int64 // global budget for bytes fetched or in flight but not yet consumed
	Concurrency int   // most GETs running at once across all streams
	NextShards  int   // objects after the current one to prefetch near its end; negative disables

	// ReorderWindow is how far from the reader's front a read may land and
	// still count as sequential: the kernel's async read-ahead requests
	// arrive out of order across this span (the mount's read_ahead_kb).
	ReorderWindow int64

	// HeadSize: a part made for a read that wants no more than its first
	// HeadSize bytes is fetched in two GETs, that head first and the rest
	// on the object's next read. Negative disables. The default is the
	// kernel's first READ of a file read in small pieces (4 pages): on a
	// rate-limited link the smaller the response, the sooner its first
	// byte (16 KiB measured a millisecond ahead of 64 KiB through a
	// 50 MB/s proxy).
	HeadSize int64
}

// WithDefaults fills every zero field with its default.
func (c Config) WithDefaults() Config {
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.PartSize == 0 {
		c.PartSize = max(DefaultPartSize/c.BlockSize, 1) * c.BlockSize
	}
	if c.MaxPrefetch == 0 {
		c.MaxPrefetch = DefaultMaxPrefetch
	}
	if c.Memory == 0 {
		c.Memory = DefaultMemory
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.NextShards == 0 {
		c.NextShards = DefaultNextShards
	}
	if c.ReorderWindow == 0 {
		c.ReorderWindow = DefaultReorderWindow
	}
	if c.HeadSize == 0 {
		c.HeadSize = DefaultHeadSize
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
	}
	return nil
}

// formatSize writes n in the largest binary unit that divides it exactly,
// so messages echo sizes the way flags are written ("8 MiB", "1536 KiB").
func formatSize(n int64) string {
	units := []string{"GiB", "MiB", "KiB"}
	for i, u := range units {
		shift := uint(30 - 10*i)
		if n != 0 && n%(1<<shift) == 0 {
			return fmt.Sprintf("%d %s", n>>shift, u)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
