// Package tarindex builds the member index of a tar shard: each regular
// member's name, the offset of its data and its size, which a map-style
// Dataset needs to pread one sample.
//
// An Index serves each shard version's index from the first of:
//
//   - memory: rendered indexes within Config.Memory, least recently asked
//     dropped first (memory.go);
//   - the cache dir: one file per shard under DIR/indexes, its header naming
//     source, key, ETag and size and holding the body's SHA-256, so that a
//     remount reads it with no store request, a new ETag builds again and a
//     damaged file is rebuilt, never served (persist.go);
//   - a sidecar index beside the shard, the text index DALI's wds2idx
//     writes, believed after a check of a few small reads (sidecar.go);
//   - a scan of the headers with small ranged reads (archive/tar skips
//     member data by seeking), about twice the header bytes, never the
//     data (scan.go).
//
// One build per shard version runs at a time however many readers ask; a
// reader that gives up does not cancel the build the others wait for.
//
// It owns the scan, the sidecar check and the rendered and persisted
// index; it never caches shard bytes and knows nothing of FUSE.
package tarindex
