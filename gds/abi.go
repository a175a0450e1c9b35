package gds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// The ioctl ABI. Every request is a restricted ioctl: the command number
// encodes direction and size, so the kernel's FUSE client copies exactly
// _IOC_SIZE bytes in and (for _IOWR) back out. Structs are fixed-size,
// little-endian, and start with a uint32 ABI version and a uint32 flags
// word (no flags are defined yet; any set bit is rejected). Output fields
// are ignored on input.
//
// Type byte 0xBD: unused in the kernel's ioctl-number list
// (Documentation/userspace-api/ioctl/ioctl-number.rst lists 0xB7 nsfs and
// remoteproc, 0xB8 mshv and cn10k, 0xBA liveupdate, 0xBF mlxbf-pka), and not
// one of the types the VFS or FUSE handle themselves ('f', 'X', 0x94,
// 0x58...), so these commands always reach the daemon.
const (
	// ABIVersion is the version this daemon speaks: 2 added the batch
	// commands (SUBMIT, WAIT, abi_batch.go), 3 the LEASE flag
	// LeaseFromRAM. Requests of the commands of version 1 may still carry
	// 1 (MinABIVersion); the batch commands need 2.
	ABIVersion = 3
	// MinABIVersion is the oldest version the version-1 commands accept.
	MinABIVersion = 1
	// IoctlType is the ioctl type byte of every shardfs command.
	IoctlType = 0xBD

	// ShmNameSize is the fixed size of the /dev/shm name field (NUL-terminated).
	ShmNameSize = 256
	// PathSize is the fixed size of a path field (NUL-terminated).
	PathSize = 1024
	// MaxLeaseExtents is how many extents one LEASE reply carries.
	MaxLeaseExtents = 64
	// MaxLeasePaths is how many distinct cache file paths one LEASE reply carries.
	MaxLeasePaths = 4

	// The kernel's _IOC_SIZE is 14 bits; a larger struct cannot be a restricted ioctl.
	maxIoctlSize = 1<<14 - 1
)

// The wire structs: the layout of every request, little-endian, with no
// padding (every field is naturally aligned, so unsafe.Sizeof is the wire
// size, checked by TestWireStructsHaveNoPadding). Sizes and offsets below
// are constants computed from them, and the command numbers are built
// from those sizes, so a struct and its command cannot disagree.
type (
	wireHeader struct{ Version, Flags uint32 }

	registerWire struct {
		wireHeader
		Size, BufID uint64
		Name        [ShmNameSize]byte
	}
	unregisterWire struct {
		wireHeader
		BufID uint64
	}
	// readFields are a READ's numbers; the path follows them.
	readFields struct {
		wireHeader
		FileOffset, Length, BufID, BufOffset, BytesRead uint64
	}
	readWire struct {
		readFields
		Path [PathSize]byte
	}
	extentWire struct {
		PathIndex, Reserved             uint32
		CacheOffset, Length, FileOffset uint64
	}
	leaseFields struct {
		wireHeader
		FileOffset, Length, LeaseID, Covered uint64
		NExtents, NPaths                     uint32
	}
	leaseWire struct {
		leaseFields
		Path    [PathSize]byte
		Extents [MaxLeaseExtents]extentWire
		Paths   [MaxLeasePaths][PathSize]byte
	}
	leaseDropWire struct {
		wireHeader
		LeaseID uint64
	}
)

const (
	registerSize   = int(unsafe.Sizeof(registerWire{}))   // 280
	unregisterSize = int(unsafe.Sizeof(unregisterWire{})) // 16
	readSize       = int(unsafe.Sizeof(readWire{}))       // 1072
	leaseExtentLen = int(unsafe.Sizeof(extentWire{}))     // 32
	leaseSize      = int(unsafe.Sizeof(leaseWire{}))      // 7216
	leaseDropSize  = int(unsafe.Sizeof(leaseDropWire{}))  // 16

	registerNameAt = int(unsafe.Offsetof(registerWire{}.Name))
	readPathAt     = int(unsafe.Offsetof(readWire{}.Path))
	leasePathAt    = int(unsafe.Offsetof(leaseWire{}.Path))
	leaseExtentsAt = int(unsafe.Offsetof(leaseWire{}.Extents))
	leasePathsAt   = int(unsafe.Offsetof(leaseWire{}.Paths))
)

// Every struct fits a restricted ioctl: a negative constant does not compile.
const _ = uint(maxIoctlSize - max(registerSize, unregisterSize, readSize, leaseSize, leaseDropSize))

const (
	iocWrite = 1 // _IOC_WRITE: user space -> daemon
	iocRead  = 2 // _IOC_READ: daemon -> user space
)

// Command numbers, Linux's generic ioctl encoding (x86, arm64, riscv):
// dir<<30 | size<<16 | type<<8 | nr, the size that of the wire struct.
const (
	CmdRegister   = uint32((iocRead|iocWrite)<<30 | registerSize<<16 | IoctlType<<8 | 1)
	CmdUnregister = uint32(iocWrite<<30 | unregisterSize<<16 | IoctlType<<8 | 2)
	CmdRead       = uint32((iocRead|iocWrite)<<30 | readSize<<16 | IoctlType<<8 | 3)
	CmdLease      = uint32((iocRead|iocWrite)<<30 | leaseSize<<16 | IoctlType<<8 | 4)
	CmdLeaseDrop  = uint32(iocWrite<<30 | leaseDropSize<<16 | IoctlType<<8 | 5)
)

// Decoding errors; the server maps them to errno in errno.go.
var (
	ErrShortPayload = errors.New("ioctl payload shorter than its struct")
	ErrABIVersion   = errors.New("unsupported ABI version")
	ErrBadField     = errors.New("malformed ioctl field")
)

// RegisterReq registers a /dev/shm file as a buffer (_IOWR).
//
//	0 u32 version | 4 u32 flags | 8 u64 size | 16 u64 buf_id (out) | 24 name[256]
type RegisterReq struct {
	Size  uint64
	BufID uint64 // out
	Name  string // a file name directly under /dev/shm
}

// UnregisterReq drops a registered buffer (_IOW).
//
//	0 u32 version | 4 u32 flags | 8 u64 buf_id
type UnregisterReq struct {
	BufID uint64
}

// ReadReq reads file bytes into a registered buffer (_IOWR).
//
//	0 u32 version | 4 u32 flags | 8 u64 file_offset | 16 u64 length |
//	24 u64 buf_id | 32 u64 buf_offset | 40 u64 bytes_read (out) | 48 path[1024]
//
// Path names the shard (relative to the mount root) on the ctl file and is
// ignored on a shard's fd.
type ReadReq struct {
	FileOffset uint64
	Length     uint64
	BufID      uint64
	BufOffset  uint64
	BytesRead  uint64 // out
	Path       string
}

// LeaseExtent is one run of leased bytes in a cache file.
//
//	0 u32 path_index | 4 u32 reserved | 8 u64 cache_offset | 16 u64 length | 24 u64 file_offset
type LeaseExtent struct {
	PathIndex   uint32 // index into LeaseReq.Paths
	CacheOffset uint64 // where the bytes start in that cache file
	Length      uint64
	FileOffset  uint64 // where they start in the shard
}

// LeaseReq pins cache extents of a shard range (_IOWR).
//
//	0 u32 version | 4 u32 flags | 8 u64 file_offset | 16 u64 length |
//	24 u64 lease_id (out) | 32 u64 covered (out) | 40 u32 n_extents (out) |
//	44 u32 n_paths (out) | 48 path[1024] | 1072 extents[64] | 3120 paths[4][1024]
//
// Covered is how many bytes from FileOffset the extents hold; it is less
// than Length when the range needs more extents or paths than one reply
// carries, and the client asks again from FileOffset+Covered.
type LeaseReq struct {
	Flags      uint32 // LeaseUnlessInRAM
	FileOffset uint64
	Length     uint64
	Path       string
	LeaseID    uint64        // out
	Covered    uint64        // out
	Extents    []LeaseExtent // out, at most MaxLeaseExtents
	Paths      []string      // out, at most MaxLeasePaths
}

// LeaseDropReq releases a lease (_IOW).
//
//	0 u32 version | 4 u32 flags | 8 u64 lease_id
type LeaseDropReq struct {
	LeaseID uint64
}

var le = binary.LittleEndian

// decodeFields checks p's size and header and decodes the numeric fields
// at its start into dst (a pointer to a wire struct holding no arrays).
// Arrays (names, paths) are read from p in place: encoding/binary reflects
// over every byte of an array, which would cost a READ ioctl microseconds.
func decodeFields(p []byte, size int, dst interface{ header() wireHeader }) error {
	return decodeFieldsSince(p, size, dst, MinABIVersion, 0)
}

// decodeFieldsSince is decodeFields for a command that exists since ABI
// version since and knows the flag bits knownFlags.
func decodeFieldsSince(p []byte, size int, dst interface{ header() wireHeader }, since, knownFlags uint32) error {
	if len(p) < size {
		return fmt.Errorf("%d < %d bytes: %w", len(p), size, ErrShortPayload)
	}
	if _, err := binary.Decode(p, le, dst); err != nil {
		return fmt.Errorf("%v: %w", err, ErrShortPayload)
	}
	h := dst.header()
	if h.Version < since || h.Version > ABIVersion {
		return fmt.Errorf("version %d, want %d..%d: %w", h.Version, since, ABIVersion, ErrABIVersion)
	}
	if h.Flags&^knownFlags != 0 {
		return fmt.Errorf("flags %#x: %w", h.Flags, ErrBadField)
	}
	return nil
}

// encodeFields makes a payload of size bytes that starts with src's fields.
func encodeFields(size int, src any) []byte {
	p := make([]byte, size)
	if _, err := binary.Encode(p, le, src); err != nil {
		panic("gds: wire struct larger than its payload: " + err.Error())
	}
	return p
}

// cString decodes a fixed NUL-terminated field. The terminator must be
// present and everything after it zero, so every accepted payload has one
// encoding.
func cString(field []byte) (string, error) {
	i := bytes.IndexByte(field, 0)
	if i < 0 {
		return "", fmt.Errorf("string field not NUL-terminated: %w", ErrBadField)
	}
	for _, b := range field[i:] {
		if b != 0 {
			return "", fmt.Errorf("bytes after string terminator: %w", ErrBadField)
		}
	}
	return string(field[:i]), nil
}

// putCString writes s NUL-padded into field; it fails when s (plus its
// terminator) does not fit or contains a NUL.
func putCString(field []byte, s string) error {
	if len(s) >= len(field) || bytes.IndexByte([]byte(s), 0) >= 0 {
		return fmt.Errorf("string of %d bytes in a %d-byte field: %w", len(s), len(field), ErrBadField)
	}
	clear(field)
	copy(field, s)
	return nil
}

// current is the header of every payload this side encodes.
var current = wireHeader{Version: ABIVersion}

func (h wireHeader) header() wireHeader { return h }

func DecodeRegister(p []byte) (RegisterReq, error) {
	var w struct {
		wireHeader
		Size, BufID uint64
	}
	if err := decodeFields(p, registerSize, &w); err != nil {
		return RegisterReq{}, err
	}
	name, err := cString(p[registerNameAt:registerSize])
	if err != nil {
		return RegisterReq{}, err
	}
	return RegisterReq{Size: w.Size, BufID: w.BufID, Name: name}, nil
}

func (r RegisterReq) Encode() ([]byte, error) {
	p := encodeFields(registerSize, struct {
		wireHeader
		Size, BufID uint64
	}{current, r.Size, r.BufID})
	return p, putCString(p[registerNameAt:], r.Name)
}

func DecodeUnregister(p []byte) (UnregisterReq, error) {
	var w unregisterWire
	if err := decodeFields(p, unregisterSize, &w); err != nil {
		return UnregisterReq{}, err
	}
	return UnregisterReq{BufID: w.BufID}, nil
}

func (r UnregisterReq) Encode() ([]byte, error) {
	return encodeFields(unregisterSize, unregisterWire{current, r.BufID}), nil
}

func DecodeRead(p []byte) (ReadReq, error) {
	var w readFields
	if err := decodeFields(p, readSize, &w); err != nil {
		return ReadReq{}, err
	}
	path, err := cString(p[readPathAt:readSize])
	if err != nil {
		return ReadReq{}, err
	}
	return ReadReq{
		FileOffset: w.FileOffset,
		Length:     w.Length,
		BufID:      w.BufID,
		BufOffset:  w.BufOffset,
		BytesRead:  w.BytesRead,
		Path:       path,
	}, nil
}

func (r ReadReq) Encode() ([]byte, error) {
	p := encodeFields(readSize, readFields{current, r.FileOffset, r.Length, r.BufID, r.BufOffset, r.BytesRead})
	return p, putCString(p[readPathAt:], r.Path)
}

// DecodeLease decodes the input fields of a LEASE request; the reply area
// is ignored.
func DecodeLease(p []byte) (LeaseReq, error) {
	r, _, err := decodeLease(p)
	return r, err
}

func decodeLease(p []byte) (LeaseReq, leaseFields, error) {
	var w leaseFields
	if err := decodeFieldsSince(p, leaseSize, &w, MinABIVersion, LeaseUnlessInRAM|LeaseFromRAM); err != nil {
		return LeaseReq{}, w, err
	}
	path, err := cString(p[leasePathAt : leasePathAt+PathSize])
	if err != nil {
		return LeaseReq{}, w, err
	}
	return LeaseReq{Flags: w.Flags, FileOffset: w.FileOffset, Length: w.Length, Path: path}, w, nil
}

// DecodeLeaseReply decodes a LEASE struct as the daemon returns it. Counts
// must fit the arrays and every extent must name a returned path.
func DecodeLeaseReply(p []byte) (LeaseReq, error) {
	r, w, err := decodeLease(p)
	if err != nil {
		return LeaseReq{}, err
	}
	r.LeaseID, r.Covered = w.LeaseID, w.Covered
	if w.NExtents > MaxLeaseExtents || w.NPaths > MaxLeasePaths {
		return LeaseReq{}, fmt.Errorf("%d extents, %d paths: %w", w.NExtents, w.NPaths, ErrBadField)
	}
	for i := range int(w.NExtents) {
		var e extentWire
		if _, err := binary.Decode(p[leaseExtentsAt+i*leaseExtentLen:], le, &e); err != nil {
			return LeaseReq{}, fmt.Errorf("extent %d: %v: %w", i, err, ErrShortPayload)
		}
		if e.PathIndex >= w.NPaths || e.Reserved != 0 {
			return LeaseReq{}, fmt.Errorf("extent %d path index %d of %d: %w", i, e.PathIndex, w.NPaths, ErrBadField)
		}
		r.Extents = append(r.Extents, LeaseExtent{PathIndex: e.PathIndex, CacheOffset: e.CacheOffset, Length: e.Length, FileOffset: e.FileOffset})
	}
	for i := range int(w.NPaths) {
		at := leasePathsAt + i*PathSize
		s, err := cString(p[at : at+PathSize])
		if err != nil {
			return LeaseReq{}, err
		}
		r.Paths = append(r.Paths, s)
	}
	return r, nil
}

func (r LeaseReq) Encode() ([]byte, error) {
	if len(r.Extents) > MaxLeaseExtents || len(r.Paths) > MaxLeasePaths {
		return nil, fmt.Errorf("%d extents, %d paths: %w", len(r.Extents), len(r.Paths), ErrBadField)
	}
	p := encodeFields(leaseSize, leaseFields{wireHeader{Version: ABIVersion, Flags: r.Flags}, r.FileOffset, r.Length, r.LeaseID, r.Covered, uint32(len(r.Extents)), uint32(len(r.Paths))})
	if err := putCString(p[leasePathAt:leasePathAt+PathSize], r.Path); err != nil {
		return nil, err
	}
	for i, x := range r.Extents {
		if int(x.PathIndex) >= len(r.Paths) {
			return nil, fmt.Errorf("extent %d path index %d: %w", i, x.PathIndex, ErrBadField)
		}
		e := extentWire{PathIndex: x.PathIndex, CacheOffset: x.CacheOffset, Length: x.Length, FileOffset: x.FileOffset}
		if _, err := binary.Encode(p[leaseExtentsAt+i*leaseExtentLen:], le, e); err != nil {
			return nil, err
		}
	}
	for i, s := range r.Paths {
		at := leasePathsAt + i*PathSize
		if err := putCString(p[at:at+PathSize], s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func DecodeLeaseDrop(p []byte) (LeaseDropReq, error) {
	var w leaseDropWire
	if err := decodeFields(p, leaseDropSize, &w); err != nil {
		return LeaseDropReq{}, err
	}
	return LeaseDropReq{LeaseID: w.LeaseID}, nil
}

func (r LeaseDropReq) Encode() ([]byte, error) {
	return encodeFields(leaseDropSize, leaseDropWire{current, r.LeaseID}), nil
}
