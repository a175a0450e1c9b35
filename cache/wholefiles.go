package cache

import (
	"context"
	"os"

	"github.com/shardfs/shardfs/cache/wholefile"
	"github.com/shardfs/shardfs/store"
)

// Complete shards are kept as whole-shard files beside the ring, in
// CACHE_DIR/shards, by package wholefile. The cache names each shard for
// it (its version id, key, ETag and size) and, to make a file, reads the
// shard's bytes from the ring, every block checked against its CRCs; the
// tier copies them, sums them, vouches for the file in its journal and
// checks a file before it first hands out a descriptor of it.

// wholeTier is what the cache needs of its whole-shard files.
type wholeTier interface {
	Make(ctx context.Context, s wholefile.Shard, read wholefile.ReadFunc) (bool, error)
	Begin(s wholefile.Shard, blockSize int64) (*wholefile.Builder, bool, error)
	OpenFile(s wholefile.Shard) (*os.File, bool)
	Has(s wholefile.Shard) bool
	MarkChecked(s wholefile.Shard)
	Dir() string
	Stats() wholefile.Stats
	Close() error
}

var _ wholeTier = (*wholefile.Tier)(nil)

// wholeShard names obj for the whole-shard files: its version in this
// cache.
func (c *Cache) wholeShard(obj store.Object) wholefile.Shard {
	return wholefile.Shard{ID: c.version(obj), Key: c.cfg.key(obj), ETag: obj.ETag, Size: obj.Size}
}

// MakeWholeFile keeps obj as a whole-shard file, made from its blocks in
// the ring, each of which must pass its CRC check. It reports whether the
// file is held when it returns: false, with a nil error, when the tier is
// off, the shard does not fit its quota, another call is making it, or a
// block is not in the ring (the caller fetches it first).
func (c *Cache) MakeWholeFile(ctx context.Context, obj store.Object) (bool, error) {
	if c.whole == nil || obj.Size <= 0 || !c.life.enter() {
		return false, nil
	}
	defer c.life.leave()
	return c.whole.Make(ctx, c.wholeShard(obj), c.checkedRead(obj))
}

// checkedRead reads obj's bytes from the ring and the RAM tier for a
// whole-shard file, every block checked against its CRCs.
func (c *Cache) checkedRead(obj store.Object) wholefile.ReadFunc {
	return func(p []byte, off int64) bool {
		n, ok := c.readAt(obj, p, off, false)
		return ok && n == len(p)
	}
}

// OpenWholeFile returns a read-only descriptor of obj's whole-shard file
// when the tier holds the complete file of obj's version and it passes
// its check: the first open of a file in this process's life reads it
// whole and compares its CRC32C with the journal's record, as does the
// first open after the file changed (size, mtime, ctime or inode). A file
// that fails is dropped, counted (Stats.WholeCheckFails) and logged,
// and OpenWholeFile reports false: the caller reads the shard another way.
// The caller closes the descriptor. The file may be evicted while open;
// the descriptor keeps reading its bytes.
func (c *Cache) OpenWholeFile(obj store.Object) (*os.File, bool) {
	if c.whole == nil || !c.life.enter() {
		return nil, false
	}
	defer c.life.leave()
	return c.whole.OpenFile(c.wholeShard(obj))
}

// HasWholeFile reports whether the tier holds obj's version whole.
func (c *Cache) HasWholeFile(obj store.Object) bool {
	if c.whole == nil || !c.life.enter() {
		return false
	}
	defer c.life.leave()
	return c.whole.Has(c.wholeShard(obj))
}

// WholeFilesDir is the directory of the whole-shard files, "" when the
// tier is off. A passthrough probe opens a file there.
func (c *Cache) WholeFilesDir() string {
	if c.whole == nil {
		return ""
	}
	return c.whole.Dir()
}
