package cache

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// A slot header is one aligned sector written after the slot's data. Its own
// CRC covers every field, and the data CRC it carries covers the data, so a
// crash between the two writes leaves a header whose data CRC does not match:
// a torn slot never looks valid.
//
// Layout (little endian):
//
//	0   magic        uint32
//	4   version      uint16
//	6   name lengths uint16 x3 (namespace, key, etag)
//	12  length       uint32  bytes of data in the slot
//	16  generation   uint64  ring-wide write counter
//	24  block index  uint64
//	32  data CRC32C  uint32
//	36  object id    [16]byte hash of namespace and key
//	52  namespace, key, etag bytes
//	headerSize-4     header CRC32C over bytes [0, headerSize-4)
const (
	headerSize    = int(alignment)
	headerMagic   = 0x53464248 // "HBFS"
	headerVersion = 1
	headerFixed   = 52
	maxNamesBytes = headerSize - headerFixed - 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

var errNamesTooLong = errors.New("namespace, key and etag do not fit in a slot header")

// slotHeader describes the block held by one slot.
type slotHeader struct {
	Generation uint64
	Index      int64
	Length     int64
	DataCRC    uint32
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
	le.PutUint32(dst[32:], h.DataCRC)
	copy(dst[36:52], h.Object[:])
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
		DataCRC:    le.Uint32(src[32:]),
	}
	copy(h.Object[:], src[36:52])
	if nsLen+keyLen+etagLen > maxNamesBytes || h.Length <= 0 || h.Length > blockSize || h.Index < 0 {
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
