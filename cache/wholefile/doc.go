// Package wholefile owns the whole-shard files: a tier beside the cache's
// ring that holds complete shards as plain files, one per object version,
// in CACHE_DIR/shards, with the journal that vouches for them. A file's
// offsets are the shard's, so the kernel can read it in place of the
// mount (FUSE passthrough) and a GPU client can read it directly. The
// ring's scattered blocks cannot give either.
//
// A file is made only from a complete set of checked bytes, which the
// caller reads for it (Tier.Make with a ReadFunc: package cache passes a
// read of its ring blocks, each of which must pass its CRC), or hands it
// block by block, with each block's CRC32C, while the shard is read
// (Tier.Begin, Builder.Write; Builder.Finish reads the blocks not handed
// through the ReadFunc and combines the blocks' CRCs; such a file is
// committed unsynced, Tier.commit says why), written to a
// temporary file with a CRC32C over the whole file, synced, vouched for by
// a synced journal record (journal.go), then renamed to NAME and the
// directory synced (package atomicfile, a Durable write). Open deletes
// what a killed write left (atomicfile's temporary files, NAME.tmp of
// earlier releases) and every file without a record of its size, so a
// file torn by a crash is never used. `shardfs cache verify` recomputes
// every file's CRC32C and deletes those that differ (Verify).
//
// A file is checked against its record's CRC32C (checkWhole, the check
// cache verify makes) before this process first hands out a descriptor of
// it, and again whenever its size, mtime, ctime or inode differs from
// what was checked: its bytes may rot on the disk between mounts, or be
// written by a hand, and a passed-through read is served by the kernel
// with nothing of ours between. A file that fails is dropped (unlinked,
// its record removed by a tombstone record), counted and logged, and
// OpenFile reports false: the caller reads the shard another way (the
// ring's checked blocks or the store). The check runs outside Tier.mu, so
// opens of other files do not wait for it; concurrent opens of one file
// wait for its one check. A file this process made from bytes it summed
// as it copied them is remembered as checked (MarkChecked), so its first
// open does not read it again.
//
// Files keep within a quota the caller gives (the cache's
// Config.WholeShardPercent of its size, the ring taking the rest). When a
// new file needs room the least recently opened go first. Eviction only
// unlinks: a descriptor already open (a passed-through handle, whose
// backing file the kernel holds) keeps reading the same bytes until it is
// closed.
//
// Lock order: the caller's own (the cache's life lock, held across each
// call) → file.check → Tier.mu. Tier.mu covers the table, the journal's
// appends, renames and unlinks (metadata operations, one per file made or
// dropped), never the copy of a file's bytes nor their check. file.check
// is held by an open of that file from its open(2) to its hand-out, the
// check included.
//
// This package never reads the ring nor fetches: the bytes of a new file
// come from the caller, and a shard whose file is missing or dropped is
// the caller's to read. It never decides which shards become files.
package wholefile
