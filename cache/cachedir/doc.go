// Package cachedir owns a cache directory's trust and its ownership: who
// may use the directory (CheckDir: the user's own, 0700, never another's;
// OpenPrivate: every file in it opened without following a link and
// refused unless it is a regular file of the user's with one link), which
// process owns it now (the flock on DIR/lock naming the owner's pid,
// LockDir and Holder) and which mount that is (DIR/owner.json, written by
// the mount that owns the dir so that `shardfs warm` can hand its work to
// that mount instead of failing on the lock).
//
// It never reads or writes what the directory caches: the ring, the
// whole-shard files, the listings and member indexes are their packages'.
package cachedir
