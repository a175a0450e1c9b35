package tarindex

import (
	"errors"
	"log/slog"
)

// DefaultMemory bounds the rendered indexes an Index keeps in memory: about
// 40 bytes a member, so 64 MiB holds the indexes of some 1.6 million
// samples. Past it the least recently asked are dropped and read again
// from the cache dir (or built again) when asked.
const DefaultMemory = 64 << 20

// Config is how an Index keeps what it built.
type Config struct {
	// Dir is the cache directory: built indexes persist under Dir/indexes,
	// keyed by source, key and ETag. "" keeps them in memory only.
	Dir string
	// Source names the source in persisted indexes (store.Store's String).
	Source string
	// Memory bounds the bytes of rendered indexes kept in memory; an index
	// larger than it is served and not kept.
	Memory int64
	// Log receives the warnings: a persisted index that was corrupt, a
	// sidecar that disagreed with its shard. nil: slog.Default().
	Log *slog.Logger
}

// DefaultConfig keeps indexes in memory only, within DefaultMemory.
func DefaultConfig() Config { return Config{Memory: DefaultMemory} }

// Validate checks c.
func (c Config) Validate() error {
	if c.Memory <= 0 {
		return errors.New("index memory must be positive")
	}
	if c.Dir != "" && c.Source == "" {
		return errors.New("a persisted index needs the source it indexes")
	}
	return nil
}
