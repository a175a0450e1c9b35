package cache

import (
	"encoding/binary"
	"path/filepath"
)

// The ring file is laid out as
//
//	[superblock][header 0 .. header N-1][data 0 .. data N-1]
//
// Headers live in their own table rather than in front of each block, so
// blocks in consecutive slots are consecutive bytes of the file and a lease
// over a shard streamed in order is one large extent.
const (
	ringFileName = "ring.dat"

	superSize  = int(alignment)
	superMagic = "SHARDFS-RING\x00\x00\x00\x00"
	// superVersion 3: slot headers carry a CRC per grain as well as per
	// chunk (header.go); 2 had chunk CRCs alone, 1 one CRC per block.
	superVersion = 3
	minSlots     = 2
)

// geometry is the shape of a ring file: how big a block is and how many
// slots there are.
type geometry struct {
	blockSize int64
	slots     int64
}

// geometryFor fits as many slots as possible into size bytes.
func geometryFor(size, blockSize int64) geometry {
	slots := (size - int64(superSize)) / (int64(headerSize) + blockSize)
	return geometry{blockSize: blockSize, slots: max(slots, 0)}
}

func (g geometry) fileSize() int64 {
	return int64(superSize) + g.slots*(int64(headerSize)+g.blockSize)
}

func (g geometry) headerOffset(slot int64) int64 {
	return int64(superSize) + slot*int64(headerSize)
}

func (g geometry) dataOffset(slot int64) int64 {
	return int64(superSize) + g.slots*int64(headerSize) + slot*g.blockSize
}

func ringPath(dir string) string { return filepath.Join(dir, ringFileName) }

// encodeSuper writes the superblock for g into dst (superSize bytes).
func (g geometry) encodeSuper(dst []byte) {
	clear(dst[:superSize])
	copy(dst, superMagic)
	le := binary.LittleEndian
	le.PutUint32(dst[16:], superVersion)
	le.PutUint64(dst[24:], uint64(g.blockSize))
	le.PutUint64(dst[32:], uint64(g.slots))
	le.PutUint32(dst[40:], checksum(dst[:40]))
}

// superFormat returns the format version of a ring superblock, 0 when src
// is not one.
func superFormat(src []byte) uint32 {
	if len(src) < superSize || string(src[:16]) != superMagic {
		return 0
	}
	return binary.LittleEndian.Uint32(src[16:])
}

// decodeSuper reads a superblock; ok is false for anything but a complete,
// current one.
func decodeSuper(src []byte) (g geometry, ok bool) {
	le := binary.LittleEndian
	if len(src) < superSize || string(src[:16]) != superMagic ||
		le.Uint32(src[16:]) != superVersion || le.Uint32(src[40:]) != checksum(src[:40]) {
		return geometry{}, false
	}
	g = geometry{blockSize: int64(le.Uint64(src[24:])), slots: int64(le.Uint64(src[32:]))}
	if g.blockSize <= 0 || g.blockSize%alignment != 0 || g.blockSize > maxBlockSize || g.slots <= 0 {
		return geometry{}, false
	}
	return g, true
}
