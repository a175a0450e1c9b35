package cache

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/shardfs/shardfs/cache/internal/crc32c"
)

// A slot header is one aligned sector written after the slot's data. Its own
// CRC covers every field, and the CRCs it carries cover the data, so a crash
// between the two writes leaves a header whose CRCs do not match: a torn
// slot never looks valid.
//
// The data is checked at two grains. A grain (grainSizeFor: 4 KiB of a
// 1 MiB block, at most maxGrains of them) is what a small read of a ring
// block reads and checks: its own size, not the block. A chunk is
// grainsPerChunk grains (64 KiB of a 1 MiB block, at most maxChunks): the
// ring keeps the chunk CRCs of every slot in memory, and a whole-block read
// checks them, which costs the same as one CRC over the block. The grain
// CRCs stay in the header, 1 KiB of it, and a small read reads them back
// with its grains; the ring keeps one CRC of that table per slot
// (grainSums.tableSum) to trust them by, so a big ring holds 68 bytes of
// sums per slot rather than 1 KiB. That CRC, not the header's own, is
// what vouches for the table: a header of the slot's previous block, left
// in the page cache or on the disk by a lost write, passes its own CRC. A block is summed once: its chunk CRCs are
// combined from its grain CRCs (crcCombine).
//
// Layout (little endian):
//
//	0    magic        uint32
//	4    version      uint16
//	6    name lengths uint16 x3 (namespace, key, etag)
//	12   length       uint32  bytes of data in the slot
//	16   generation   uint64  ring-wide write counter
//	24   block index  uint64
//	32   chunk size   uint32
//	36   object id    [16]byte hash of namespace and key
//	52   chunk CRC32Cs uint32 x maxChunks (unused ones zero)
//	116  grain CRC32Cs uint32 x maxGrains (unused ones zero)
//	1140 namespace, key, etag bytes (at most 2952: an S3 key of 1024 bytes
//	     leaves ample room for a namespace and an ETag)
//	headerSize-4     header CRC32C over bytes [0, headerSize-4)
const (
	headerSize       = int(alignment)
	headerMagic      = 0x53464248 // "HBFS"
	headerVersion    = 3
	grainTableOffset = 52 + 4*maxChunks
	grainTableBytes  = 4 * maxGrains
	headerFixed      = grainTableOffset + grainTableBytes
	maxNamesBytes    = headerSize - headerFixed - 4
)

const (
	// maxChunks is how many CRCs a whole-block read checks a slot's data by.
	maxChunks = 16
	// maxGrains is how many CRCs a small read checks a slot's data by.
	maxGrains      = 256
	grainsPerChunk = maxGrains / maxChunks
)

// chunkSums are the CRC32Cs of a slot's data chunks; grainSums those of
// its grains.
type (
	chunkSums [maxChunks]uint32
	grainSums [maxGrains]uint32
)

// grainSizeFor is the grain of blocks of blockSize bytes: a 256th of a
// block, rounded up to the alignment, so that a grain is a whole number of
// pages.
func grainSizeFor(blockSize int64) int64 {
	return alignUp((blockSize + maxGrains - 1) / maxGrains)
}

// chunkSizeFor is the chunk of blocks of blockSize bytes: grainsPerChunk
// grains, so that a chunk's CRC is its grains' CRCs combined (a sixteenth
// of a 1 MiB block; a block of fewer than grainsPerChunk grains is one
// chunk).
func chunkSizeFor(blockSize int64) int64 {
	return grainsPerChunk * grainSizeFor(blockSize)
}

// sumBlock computes the chunk and grain CRCs of data (at most a block
// whose grain is grain bytes), reading data once.
func sumBlock(data []byte, grain int64) (chunks chunkSums, grains grainSums) {
	for i := 0; int64(i)*grain < int64(len(data)); i++ {
		lo := int64(i) * grain
		grains[i] = checksum(data[lo:min(lo+grain, int64(len(data)))])
	}
	return chunksOf(&grains, int64(len(data)), grain), grains
}

// chunksOf combines the chunk CRCs of a block of length bytes from the
// CRCs of its grains, without reading the block.
func chunksOf(grains *grainSums, length, grain int64) (chunks chunkSums) {
	full := crc32c.ShifterFor(grain) // the same for every grain but a short last one
	for i := 0; int64(i)*grain < length; i++ {
		lo := int64(i) * grain
		hi := min(lo+grain, length)
		c := &chunks[i/grainsPerChunk]
		switch {
		case i%grainsPerChunk == 0:
			*c = grains[i]
		case hi-lo == grain:
			*c = full.Combine(*c, grains[i])
		default:
			*c = crc32c.Combine(*c, grains[i], crc32c.Shift(hi-lo))
		}
	}
	return chunks
}

// blockSumOf is the CRC32C of a block of length bytes from its chunks'
// CRCs, without reading the block: what a whole-shard file written from
// the block sums it by.
func blockSumOf(chunks *chunkSums, length, chunk int64) uint32 {
	sum := chunks[0]
	full := crc32c.ShifterFor(chunk)
	for i := int64(1); i*chunk < length; i++ {
		if n := min(chunk, length-i*chunk); n == chunk {
			sum = full.Combine(sum, chunks[i])
		} else {
			sum = crc32c.Combine(sum, chunks[i], crc32c.Shift(n))
		}
	}
	return sum
}

// tableSum is the CRC32C of the grain CRCs as the header stores them: what
// a small read checks the table it reads back against.
func (g *grainSums) tableSum() uint32 {
	var table [grainTableBytes]byte
	g.encode(table[:])
	return checksum(table[:])
}

func (g *grainSums) encode(dst []byte) {
	for i, sum := range g {
		binary.LittleEndian.PutUint32(dst[4*i:], sum)
	}
}

func (g *grainSums) decode(src []byte) {
	for i := range g {
		g[i] = binary.LittleEndian.Uint32(src[4*i:])
	}
}

// verifyChunks checks data, which starts at piece first of a slot holding
// length bytes checked in pieces of size bytes (chunks or grains), against
// sums: every piece that data reaches into, each of which data must hold
// to its end (or to length).
func verifyChunks(data []byte, first int, length, size int64, sums []uint32) bool {
	end := min(int64(len(data)), length-int64(first)*size)
	for i, lo := first, int64(0); lo < end; i, lo = i+1, lo+size {
		hi := min(lo+size, length-int64(first)*size)
		if i >= len(sums) || hi > int64(len(data)) || checksum(data[lo:hi]) != sums[i] {
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
	Grains     grainSums
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
	h.Grains.encode(dst[grainTableOffset:headerFixed])
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
	h.Grains.decode(src[grainTableOffset:headerFixed])
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
