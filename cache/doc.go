// Package cache owns the local copies of shard bytes: fixed-size blocks of
// one object version, keyed by (namespace, key, ETag, block index) where
// the namespace is the bucket and the key the object's full key in it
// (Config.KeyPrefix + the key the source lists), kept in
// a RAM tier (ristretto, its blocks on the Go heap or in a shared /dev/shm
// arena, package cache/arena) and in a persistent ring of preallocated
// slots in a cache directory on local NVMe.
//
// The ring is the durable tier. Every slot carries a header (object, ETag,
// block index, length, generation, and CRC32Cs of the data: one per 64 KiB
// chunk of a 1 MiB block and one per 4 KiB grain, header.go) from which the
// index is rebuilt at Open, so the cache survives unmount, crash and
// reboot. The grain CRCs of a fetched part are made while its bytes arrive
// (Summer, summer.go), by the goroutine that receives them; the ring
// combines the chunk CRCs from them and sums only what came without.
// Every read from the ring checks the CRCs of what it reads: a whole-block
// read the chunk CRCs, kept in memory; a small read the grains
// it lies in, against the grain CRCs it reads back from the header (and
// keeps, grainmemo.go, for the slot's next small reads); a block
// that fails is dropped and reported as a miss so the caller refetches it. The RAM tier is a hint and
// never the source of truth for what the ring holds. Ring I/O bypasses the
// page cache (O_DIRECT, or fadvise where O_DIRECT is refused) so a block is
// never held in RAM twice, with one exception: the blocks of random
// readers that the RAM tier has no room for (they evict nothing there)
// are written, and their small
// reads (ReadChunks, a random reader's samples, each checking its own
// 4 KiB grains, and reading their 64 KiB chunks when the page cache lacks
// them) read, through the page cache, which keeps them in
// the memory the RAM tier leaves free for the block's next samples; every
// read still checks them.
//
// One process owns a cache directory at a time (a lock file naming its
// pid). The directory is the user's alone (created 0700, files 0600, opened
// without following links; a directory another user owns or could write is
// refused). Both are package cache/cachedir's, which also keeps the record
// of the mount that owns the dir (owner.json). A directory that cannot hold the ring asked for fails Open: a
// cache asked for a disk tier never runs without one. A ring of another
// shape is kept when no size is asked for, and otherwise refused, never
// emptied. A ring that fails during the run is switched off with one
// warning; the RAM tier and the network keep serving.
//
// Beside the ring, complete shards are kept as whole files, one per object
// version, under CACHE_DIR/shards (package cache/wholefile, behind
// wholeTier in wholefiles.go): offsets equal to the shard's, so the kernel
// can read them in place of the mount (FUSE passthrough). This package
// names each shard for them and makes a file only from verified blocks:
// by warm, from the ring; in a mount, for a shard a handle read whole,
// written from the blocks Put stores as the shard is read (build.go) or
// copied from the ring after (promote.go); the files' journal and their
// checks are wholefile's. They
// share the one size bound (Config.WholeShardPercent of Size; the ring
// gets the rest).
//
// The API is small and speaks in block indexes: Lookup says which tiers
// hold a block, Get returns one (bytes and the tier that served), ReadAt
// copies a byte range out, Put stores fetched blocks with a Placement
// (read-ahead: ring only; random read: RAM and ring; one-shot: RAM only,
// into free room), and Lease pins ring extents for GPU readers. The
// caller chooses the placement; the tiers never guess it.
//
// This package never fetches from a store, never decides what to prefetch
// and never knows about FUSE; callers put what they fetched and ask for what
// they need.
package cache
