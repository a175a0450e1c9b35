package cache

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/shardfs/shardfs/store"
)

// objectID names one object of one source: a hash of namespace and key.
type objectID [16]byte

// versionID names one version of one object: a hash of namespace, key and
// ETag. Blocks of two versions never share a versionID, so bytes of a
// changed object are never served as the current ones.
type versionID [16]byte

// blockKey is the identity of one cached block.
type blockKey struct {
	version versionID
	index   int64
}

func hashFields(fields ...string) [16]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range fields {
		// Length-prefix each field so ("ab","c") and ("a","bc") differ.
		binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

func objectIDOf(namespace, key string) objectID {
	return objectID(hashFields("object", namespace, key))
}

func versionOf(namespace, key, etag string) versionID {
	return versionID(hashFields("version", namespace, key, etag))
}

// key is obj's key where the cache names it: under KeyPrefix, so that
// the blocks of s3://bucket/wds/a.tar are the same blocks whether they
// were cached through a mount of s3://bucket or of s3://bucket/wds.
func (c Config) key(obj store.Object) string { return c.KeyPrefix + obj.Key }

// version is the versionID of obj's blocks in this cache.
func (c Config) version(obj store.Object) versionID {
	return versionOf(c.Namespace, c.key(obj), obj.ETag)
}

// memKey is the RAM tier's key for a block.
func (k blockKey) memKey() string {
	var b [24]byte
	copy(b[:16], k.version[:])
	binary.LittleEndian.PutUint64(b[16:], uint64(k.index))
	return string(b[:])
}

// blockLength is the length of block index of obj: BlockSize except for the
// object's last block.
func blockLength(obj store.Object, blockSize, index int64) int64 {
	return min(blockSize, obj.Size-index*blockSize)
}
