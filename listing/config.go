package listing

import (
	"errors"
	"fmt"
	"time"
)

// Config says where a mount's listing comes from and how long it stands.
type Config struct {
	// TTL is how long a listing stands: a persisted copy older than this
	// is listed again, and a mount refreshes its listing this often.
	// 0 is forever: training data is immutable, so by default a source
	// is listed once per node and never again.
	TTL time.Duration
	// Dir holds persisted listings (the cache directory); "" keeps none.
	Dir string
	// Key names the source a persisted listing belongs to: the endpoint
	// and s3://bucket/prefix, or the directory.
	Key string
	// Manifest, when set, is the listing: a file of JSON lines (shardfs
	// manifest). It is neither persisted nor refreshed.
	Manifest string
	// RetryBase and RetryMax bound the backoff between failed refreshes.
	RetryBase, RetryMax time.Duration
}

// DefaultConfig is a listing taken once and kept forever.
func DefaultConfig() Config {
	return Config{RetryBase: 5 * time.Second, RetryMax: 5 * time.Minute}
}

// Validate rejects settings that cannot work together, naming them.
func (c Config) Validate() error {
	switch {
	case c.TTL < 0:
		return fmt.Errorf("metadata TTL %s: must not be negative (0 is forever)", c.TTL)
	case c.Manifest != "" && c.TTL > 0:
		return errors.New("a manifest is a fixed listing: it cannot be refreshed with a metadata TTL")
	case c.RetryBase <= 0 || c.RetryMax < c.RetryBase:
		return fmt.Errorf("refresh backoff %s to %s: want 0 < base <= max", c.RetryBase, c.RetryMax)
	}
	return nil
}
