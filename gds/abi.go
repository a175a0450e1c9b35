package gds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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
	// ABIVersion is the value every request's first field must hold.
	ABIVersion = 1
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

	registerSize   = 24 + ShmNameSize // 280
	unregisterSize = 16
	readSize       = 48 + PathSize // 1072
	leaseExtentLen = 32
	leaseSize      = 48 + PathSize + MaxLeaseExtents*leaseExtentLen + MaxLeasePaths*PathSize // 7216
	leaseDropSize  = 16

	// The kernel's _IOC_SIZE is 14 bits; a larger struct cannot be a restricted ioctl.
	maxIoctlSize = 1<<14 - 1
)

const (
	iocWrite = 1 // _IOC_WRITE: user space -> daemon
	iocRead  = 2 // _IOC_READ: daemon -> user space
)

// ioc builds a Linux ioctl number: dir<<30 | size<<16 | type<<8 | nr.
func ioc(dir, nr, size uint32) uint32 {
	return dir<<30 | size<<16 | IoctlType<<8 | nr
}

// Command numbers (Linux generic ioctl encoding: x86, arm64, riscv).
var (
	CmdRegister   = ioc(iocRead|iocWrite, 1, registerSize)
	CmdUnregister = ioc(iocWrite, 2, unregisterSize)
	CmdRead       = ioc(iocRead|iocWrite, 3, readSize)
	CmdLease      = ioc(iocRead|iocWrite, 4, leaseSize)
	CmdLeaseDrop  = ioc(iocWrite, 5, leaseDropSize)
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

// checkHeader validates the version/flags header of a payload of size n.
func checkHeader(p []byte, n int) error {
	if len(p) < n {
		return fmt.Errorf("%d < %d bytes: %w", len(p), n, ErrShortPayload)
	}
	if v := le.Uint32(p[0:]); v != ABIVersion {
		return fmt.Errorf("version %d, want %d: %w", v, ABIVersion, ErrABIVersion)
	}
	if f := le.Uint32(p[4:]); f != 0 {
		return fmt.Errorf("flags %#x: %w", f, ErrBadField)
	}
	return nil
}

func putHeader(p []byte) {
	le.PutUint32(p[0:], ABIVersion)
	le.PutUint32(p[4:], 0)
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

func DecodeRegister(p []byte) (RegisterReq, error) {
	if err := checkHeader(p, registerSize); err != nil {
		return RegisterReq{}, err
	}
	name, err := cString(p[24:registerSize])
	if err != nil {
		return RegisterReq{}, err
	}
	return RegisterReq{Size: le.Uint64(p[8:]), BufID: le.Uint64(p[16:]), Name: name}, nil
}

func (r RegisterReq) Encode() ([]byte, error) {
	p := make([]byte, registerSize)
	putHeader(p)
	le.PutUint64(p[8:], r.Size)
	le.PutUint64(p[16:], r.BufID)
	return p, putCString(p[24:], r.Name)
}

func DecodeUnregister(p []byte) (UnregisterReq, error) {
	if err := checkHeader(p, unregisterSize); err != nil {
		return UnregisterReq{}, err
	}
	return UnregisterReq{BufID: le.Uint64(p[8:])}, nil
}

func (r UnregisterReq) Encode() ([]byte, error) {
	p := make([]byte, unregisterSize)
	putHeader(p)
	le.PutUint64(p[8:], r.BufID)
	return p, nil
}

func DecodeRead(p []byte) (ReadReq, error) {
	if err := checkHeader(p, readSize); err != nil {
		return ReadReq{}, err
	}
	path, err := cString(p[48:readSize])
	if err != nil {
		return ReadReq{}, err
	}
	return ReadReq{
		FileOffset: le.Uint64(p[8:]),
		Length:     le.Uint64(p[16:]),
		BufID:      le.Uint64(p[24:]),
		BufOffset:  le.Uint64(p[32:]),
		BytesRead:  le.Uint64(p[40:]),
		Path:       path,
	}, nil
}

func (r ReadReq) Encode() ([]byte, error) {
	p := make([]byte, readSize)
	putHeader(p)
	le.PutUint64(p[8:], r.FileOffset)
	le.PutUint64(p[16:], r.Length)
	le.PutUint64(p[24:], r.BufID)
	le.PutUint64(p[32:], r.BufOffset)
	le.PutUint64(p[40:], r.BytesRead)
	return p, putCString(p[48:], r.Path)
}

// DecodeLease decodes the input fields of a LEASE request; the reply area
// is ignored.
func DecodeLease(p []byte) (LeaseReq, error) {
	if err := checkHeader(p, leaseSize); err != nil {
		return LeaseReq{}, err
	}
	path, err := cString(p[48 : 48+PathSize])
	if err != nil {
		return LeaseReq{}, err
	}
	return LeaseReq{FileOffset: le.Uint64(p[8:]), Length: le.Uint64(p[16:]), Path: path}, nil
}

// DecodeLeaseReply decodes a LEASE struct as the daemon returns it. Counts
// must fit the arrays and every extent must name a returned path.
func DecodeLeaseReply(p []byte) (LeaseReq, error) {
	r, err := DecodeLease(p)
	if err != nil {
		return LeaseReq{}, err
	}
	r.LeaseID, r.Covered = le.Uint64(p[24:]), le.Uint64(p[32:])
	nExt, nPaths := le.Uint32(p[40:]), le.Uint32(p[44:])
	if nExt > MaxLeaseExtents || nPaths > MaxLeasePaths {
		return LeaseReq{}, fmt.Errorf("%d extents, %d paths: %w", nExt, nPaths, ErrBadField)
	}
	ext := p[48+PathSize:]
	for i := range int(nExt) {
		e := ext[i*leaseExtentLen:]
		x := LeaseExtent{PathIndex: le.Uint32(e), CacheOffset: le.Uint64(e[8:]), Length: le.Uint64(e[16:]), FileOffset: le.Uint64(e[24:])}
		if x.PathIndex >= nPaths || le.Uint32(e[4:]) != 0 {
			return LeaseReq{}, fmt.Errorf("extent %d path index %d of %d: %w", i, x.PathIndex, nPaths, ErrBadField)
		}
		r.Extents = append(r.Extents, x)
	}
	paths := p[48+PathSize+MaxLeaseExtents*leaseExtentLen:]
	for i := range int(nPaths) {
		s, err := cString(paths[i*PathSize : (i+1)*PathSize])
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
	p := make([]byte, leaseSize)
	putHeader(p)
	le.PutUint64(p[8:], r.FileOffset)
	le.PutUint64(p[16:], r.Length)
	le.PutUint64(p[24:], r.LeaseID)
	le.PutUint64(p[32:], r.Covered)
	le.PutUint32(p[40:], uint32(len(r.Extents)))
	le.PutUint32(p[44:], uint32(len(r.Paths)))
	if err := putCString(p[48:48+PathSize], r.Path); err != nil {
		return nil, err
	}
	ext := p[48+PathSize:]
	for i, x := range r.Extents {
		if int(x.PathIndex) >= len(r.Paths) {
			return nil, fmt.Errorf("extent %d path index %d: %w", i, x.PathIndex, ErrBadField)
		}
		e := ext[i*leaseExtentLen:]
		le.PutUint32(e, x.PathIndex)
		le.PutUint64(e[8:], x.CacheOffset)
		le.PutUint64(e[16:], x.Length)
		le.PutUint64(e[24:], x.FileOffset)
	}
	paths := p[48+PathSize+MaxLeaseExtents*leaseExtentLen:]
	for i, s := range r.Paths {
		if err := putCString(paths[i*PathSize:(i+1)*PathSize], s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func DecodeLeaseDrop(p []byte) (LeaseDropReq, error) {
	if err := checkHeader(p, leaseDropSize); err != nil {
		return LeaseDropReq{}, err
	}
	return LeaseDropReq{LeaseID: le.Uint64(p[8:])}, nil
}

func (r LeaseDropReq) Encode() ([]byte, error) {
	p := make([]byte, leaseDropSize)
	putHeader(p)
	le.PutUint64(p[8:], r.LeaseID)
	return p, nil
}
