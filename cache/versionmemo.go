package cache

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/shardfs/shardfs/store"
)

// versionMemo remembers the versionIDs of the objects read lately. A
// versionID is a SHA-256 over namespace, key and ETag, and every cache
// lookup needs one: a random reader's 4 KiB read made a lookup or two,
// and the hash (with the key's copy into a byte slice) cost more than the
// RAM tier's own lookup. A slot holds one object; a collision only means
// the hash is computed again.
type versionMemo struct {
	seed  maphash.Seed
	slots [versionMemoSlots]atomic.Pointer[memoEntry]
}

const versionMemoSlots = 1024

// memoEntry is one remembered versionID, immutable once stored.
type memoEntry struct {
	key, etag string // the object's, as store.Object has them
	id        versionID
}

func newVersionMemo() *versionMemo { return &versionMemo{seed: maphash.MakeSeed()} }

// version is the versionID of obj's blocks in this cache (Config.version),
// from the memo when it holds obj.
func (c *Cache) version(obj store.Object) versionID {
	m := c.versions
	slot := &m.slots[maphash.String(m.seed, obj.Key)%versionMemoSlots]
	if e := slot.Load(); e != nil && e.key == obj.Key && e.etag == obj.ETag {
		return e.id
	}
	id := c.cfg.version(obj)
	slot.Store(&memoEntry{key: obj.Key, etag: obj.ETag, id: id})
	return id
}
