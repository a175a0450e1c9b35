// Package warm fills a cache directory with shards before a run (`shardfs
// warm`), in three steps: a Plan says what the cache lacks of the shards
// given (this node's selection) and what it already holds; Run fetches
// what is missing; the Result reports shards warmed, bytes fetched and
// skipped, shards kept whole, and the failure of each shard that failed.
//
// Run fetches through the read path itself rather than with GETs of its
// own put into the cache: it drives a prefetch.Engine over the cache, one
// Reader per shard that fills the cache (Reader.FillCache), read from the
// shard's first byte to its last in PartSize steps, Concurrency shards at
// once. So a warm gets what a mount's reads get, from the one place that
// does it: parts cut where the ring starts or stops holding blocks (a
// cached stretch costs no GET, and a shard partly cached fetches only its
// missing blocks), part buffers pooled within one memory budget and
// aligned for the ring's direct writes, a failed range tried once more,
// and the arrival checksums: the grain CRCs the GET pool sums as bytes
// arrive (cache.Summer) are the ones the ring stores and every read of
// it checks. What it costs: a shard partly cached has its cached stretches
// read back from the ring (checked, no GET), and each shard's first parts
// follow the window's ramp from one block, as a mount's first reads do.
// Shards the ring holds whole are not read at all.
//
// The engine sees the store and the cache through two thin wrappers of
// this package (handoff.go): they count each GET of a shard until its
// bytes are in the cache, so that a shard's reader is closed, and the
// shard made a whole-shard file (cache.MakeWholeFile), only once every
// block it fetched is in the ring (closing a reader cancels the GETs it
// still has running). A reader's close is not passed on to the cache
// (Cache.ReadDone): warm makes the whole files itself, and counts them.
//
// When a running mount owns the cache dir, ThroughMount reads each shard
// through that mount instead, marking each file it opens with
// fs.CmdFillCache, and the mount's read path fills the cache it owns.
//
// This package never selects shards, opens a store or a cache, or prints:
// the command does (cmd/shardfs/warm.go).
package warm
