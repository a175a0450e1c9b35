// Package fs owns the FUSE view of a source: a read-only directory tree
// made from the listing, and one handle per open whose reads one Reader of
// the ReadPath answers.
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
// A handle's reads, and the one-shot reads of the GPU interface, go to
// the ReadPath, which decides where the bytes come from and names the tier
// (prefetch/source.go); the reply is written from the bytes it lends
// without a copy (reply.go).
// Under KeepPages, a random read that lands in a block the cache holds
// whole has the whole block handed to the kernel's page cache after its
// reply, so the block's other reads stay in the kernel (pagefill.go).
//
// A hidden directory /.shardfs (not listed by readdir, reachable by name)
// holds the side files: ctl (capabilities and ioctls of the GPU interface),
// stats (JSON figures) and hints, which takes the loader's schedule, one
// line each, in the order it will read:
//
//	PATH                  a file it opens next: its start is prefetched
//	PATH OFFSET LENGTH    a byte range it reads next (a sample schedule)
//
// PATH is relative to the mount root or absolute under the mount point;
// OFFSET and LENGTH are decimal bytes. A line that names a file whole is a
// PATH line, even if it ends in two numbers. Ranges go to the read path's
// Schedule with the writing process as owner (one queue per process);
// whole paths to Hint. Bad lines never reach either: a line naming no
// file, a range past its file's end (clipped there; dropped when it starts
// there), a range longer than HintRangeMax, a line that is neither form,
// and what the read path reports (a range overlapping the writer's
// previous one, a range refused by a full schedule) are counted per kind
// in HintStats and logged once per 10 s per kind (hints.go). Ranges of a shard
// whose opens the kernel serves itself (passthrough.go) are left out:
// their reads never reach the read path.
//
// This package never talks to a backend except through the interfaces
// declared in read.go and options.go; it never decides where bytes come
// from or what to read ahead, and never owns cache state. Errors become errno in one place, errno.go.
package fs
