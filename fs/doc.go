// Package fs owns the FUSE view of a source: a read-only directory tree
// built once from the listing, one node per key, and one handle per open
// that serves reads through an ordered chain of readers.
//
// The model follows go-fuse's own fs package: the tree is made of
// persistent inodes created when the root is added, each node type
// implements only the small per-operation interfaces it needs, and every
// operation that would modify the tree answers EROFS.
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
