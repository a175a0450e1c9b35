package cache

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// A slot header is one aligned sector written after the slot's data. Its own
// CRC covers every field, and the chunk CRCs it carries cover the data, so a
// crash between the two writes leaves a header whose chunk CRCs do not
// match: a torn slot never looks valid.
//
// The data is checked in chunks (at most maxChunks of them, chunkSizeFor
// the block size: 64 KiB of a 1 MiB block) rather than as one block, so
// that a small read of a ring block reads and checks the chunks it needs,
// not the whole block; a whole-block read checks every chunk, which costs
// the same as one CRC over the block.
//
// Layout (little endian):
//
//	0   magic        uint32
//	4   version      uint16
//	6   name lengths uint16 x3 (namespace, key, etag)
//	12  length       uint32  bytes of data in the slot
//	16  generation   uint64  ring-wide write counter
//	24  block index  uint64
//	32  chunk size   uint32
//	36  object id    [16]byte hash of namespace and key
//	52  chunk CRC32Cs uint32 x maxChunks (unused ones zero)
//	116 namespace, key, etag bytes
//	headerSize-4     header CRC32C over bytes [0, headerSize-4)
const (
	headerSize    = int(alignment)
	headerMagic   = 0x53464248 // "HBFS"
	headerVersion = 2
	headerFixed   = 52 + 4*maxChunks
	maxNamesBytes = headerSize - headerFixed - 4
)

// maxChunks is how many CRCs a slot's data is checked by.
const maxChunks = 16

// chunkSums are the CRC32Cs of a slot's data chunks.
type chunkSums [maxChunks]uint32

// chunkSizeFor is the chunk of blocks of blockSize bytes: a sixteenth of a
// block, rounded up to the alignment, so that a chunk is read with
// O_DIRECT on its own.
func chunkSizeFor(blockSize int64) int64 {
	return alignUp((blockSize + maxChunks - 1) / maxChunks)
}

// sumChunks computes the chunk CRCs of data (at most a block).
func sumChunks(data []byte, chunk int64) (s chunkSums) {
	for i := 0; int64(i)*chunk < int64(len(data)); i++ {
		lo := int64(i) * chunk
		s[i] = checksum(data[lo:min(lo+chunk, int64(len(data)))])
	}
	return s
}

// verifyChunks checks data, which starts at chunk first of a slot holding
// length bytes, against sums: every chunk that data reaches into, each of
// which data must hold to its end (or to length).
func verifyChunks(data []byte, first int, length, chunk int64, sums *chunkSums) bool {
	end := min(int64(len(data)), length-int64(first)*chunk)
	for i, lo := first, int64(0); lo < end; i, lo = i+1, lo+chunk {
		hi := min(lo+chunk, length-int64(first)*chunk)
		if i >= maxChunks || hi > int64(len(data)) || checksum(data[lo:hi]) != sums[i] {
			return false
		}
	}
	return true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

var errNamesTooLong = errors.New("namespace, key and etag do not fit in a slot header")

// slotHeader describes the block held by one slot.
type slotHeader struct {
	Generation uint64
	Index      int64
	Length     int64
	ChunkSize  int64
	Chunks     chunkSums
	Object     objectID
	Namespace  string
	Key        string
	ETag       string
}

func (h slotHeader) blockKey() blockKey {
	return blockKey{version: versionOf(h.Namespace, h.Key, h.ETag), index: h.Index}
}

// encode writes h into dst, which is headerSize bytes.
func (h slotHeader) encode(dst []byte) error {
	if len(h.Namespace)+len(h.Key)+len(h.ETag) > maxNamesBytes {
		return errNamesTooLong
	}
	clear(dst[:headerSize])
	le := binary.LittleEndian
	le.PutUint32(dst[0:], headerMagic)
	le.PutUint16(dst[4:], headerVersion)
	le.PutUint16(dst[6:], uint16(len(h.Namespace)))
	le.PutUint16(dst[8:], uint16(len(h.Key)))
	le.PutUint16(dst[10:], uint16(len(h.ETag)))
	le.PutUint32(dst[12:], uint32(h.Length))
	le.PutUint64(dst[16:], h.Generation)
	le.PutUint64(dst[24:], uint64(h.Index))
	le.PutUint32(dst[32:], uint32(h.ChunkSize))
	copy(dst[36:52], h.Object[:])
	for i, sum := range h.Chunks {
		le.PutUint32(dst[52+4*i:], sum)
	}
	n := headerFixed
	n += copy(dst[n:], h.Namespace)
	n += copy(dst[n:], h.Key)
	copy(dst[n:], h.ETag)
	le.PutUint32(dst[headerSize-4:], checksum(dst[:headerSize-4]))
	return nil
}

// headerState says what decodeHeader found in a header sector.
type headerState int

const (
	headerEmpty   headerState = iota // never written (all zero magic)
	headerValid                      // a complete header
	headerDamaged                    // written but unreadable: torn or corrupted
)

// decodeHeader parses one header sector. blockSize bounds the length field.
func decodeHeader(src []byte, blockSize int64) (slotHeader, headerState) {
	le := binary.LittleEndian
	if len(src) < headerSize {
		return slotHeader{}, headerDamaged
	}
	magic := le.Uint32(src[0:])
	if magic == 0 {
		return slotHeader{}, headerEmpty
	}
	if magic != headerMagic || le.Uint16(src[4:]) != headerVersion ||
		le.Uint32(src[headerSize-4:]) != checksum(src[:headerSize-4]) {
		return slotHeader{}, headerDamaged
	}
	nsLen, keyLen, etagLen := int(le.Uint16(src[6:])), int(le.Uint16(src[8:])), int(le.Uint16(src[10:]))
	h := slotHeader{
		Length:     int64(le.Uint32(src[12:])),
		Generation: le.Uint64(src[16:]),
		Index:      int64(le.Uint64(src[24:])),
		ChunkSize:  int64(le.Uint32(src[32:])),
	}
	copy(h.Object[:], src[36:52])
	for i := range h.Chunks {
		h.Chunks[i] = le.Uint32(src[52+4*i:])
	}
	if nsLen+keyLen+etagLen > maxNamesBytes || h.Length <= 0 || h.Length > blockSize || h.Index < 0 ||
		h.ChunkSize != chunkSizeFor(blockSize) {
		return slotHeader{}, headerDamaged
	}
	n := headerFixed
	h.Namespace = string(src[n : n+nsLen])
	n += nsLen
	h.Key = string(src[n : n+keyLen])
	n += keyLen
	h.ETag = string(src[n : n+etagLen])
	return h, headerValid
}
