// Package tarindex builds the member index of a tar shard: each regular
// member's name, the offset of its data and its size, which a map-style
// Dataset needs to pread one sample. It reads only the headers, with small
// ranged reads through a Fetcher (archive/tar skips member data by seeking),
// so indexing N shards costs about N times their header bytes, never the
// shards. An Index builds each shard's once per version, one build at a time
// per shard however many readers ask, and keeps the result in memory.
//
// It owns the scan and the rendered index; it never caches shard bytes and
// knows nothing of FUSE.
package tarindex
