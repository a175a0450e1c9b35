// Package fs owns the FUSE view of a source: a read-only directory tree
// made from the listing, and one handle per open that serves reads through
// an ordered chain of readers.
//
// The listing is held as one compact, immutable tree (tree.go: the
// listing's own slice of objects plus one sorted entry per name); inodes
// are made only for the names the kernel looks up, so a million keys cost
// the tree, not a million inodes. A refresh builds a new tree, swaps it in
// whole and tells the kernel which names, attributes, pages and cached
// directory listings changed (refresh.go). The kernel is told the mount
// has no extended attributes and may keep directory listings, so a warm
// `ls -l` is answered by the kernel alone.
//
// The model follows go-fuse's own fs package: each node type implements
// only the small per-operation interfaces it needs, and every operation
// that would modify the tree answers EROFS.
//
// A read asks each reader of the chain in turn; a reader that cannot serve
// declines with errDecline and the next one is asked. With read-ahead the
// chain is the RAM tier, then the handle's prefetch stream, whose parts come
// from the NVMe ring where it holds them and from the store otherwise, so
// ring blocks are read ahead of the reader like network ones. Without it,
// the chain is the RAM tier and ring, then a plain ranged GET. The chain is
// assembled from what is configured, so the cache and the prefetcher slot in
// without this package knowing their internals.
//
// A hidden directory /.shardfs (not listed by readdir, reachable by name)
// holds the side files: ctl (capabilities and ioctls of the GPU interface),
// stats (JSON figures) and hints (write upcoming paths, one per line).
//
// This package never talks to a backend except through the Store and the
// interfaces declared in chain.go; it never decides read-ahead and never
// owns cache state. Errors become errno in one place, errno.go.
package fs
