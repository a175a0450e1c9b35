package gds

import (
	"fmt"
	"unsafe"
)

// WHOLE_FILE (command 8, ABI version 2): where the cache holds a shard as
// one complete file whose offsets are the shard's (the whole-shard file
// tier, CACHE_DIR/shards), so that a client reads it itself, with cuFile
// or O_DIRECT, instead of leasing scattered ring extents. The command is
// announced by the capabilities (commands.whole_file, whole_files) rather
// than by a new ABI version: a client asks only a daemon that lists it,
// and an older daemon answers ENOTTY.
//
//	   0 u32 version | 4 u32 flags | 8 u64 size (out) |
//	  16 path[1024]  the shard, relative to the mount (ignored on a shard's fd) |
//	1040 file[1024]  out: the whole-shard file's absolute path
type (
	wholeFields struct {
		wireHeader
		Size uint64
	}
	wholeWire struct {
		wholeFields
		Path [PathSize]byte
		File [PathSize]byte
	}
)

const (
	wholeSize   = int(unsafe.Sizeof(wholeWire{})) // 2064
	wholePathAt = int(unsafe.Offsetof(wholeWire{}.Path))
	wholeFileAt = int(unsafe.Offsetof(wholeWire{}.File))

	// wholeSince is the ABI version a WHOLE_FILE request carries at least.
	wholeSince = 2
)

const _ = uint(maxIoctlSize - wholeSize)

// CmdWholeFile asks where the cache holds a shard whole (_IOWR).
const CmdWholeFile = uint32((iocRead|iocWrite)<<30 | wholeSize<<16 | IoctlType<<8 | 8)

// WholeFileReq is a WHOLE_FILE request and its reply.
type WholeFileReq struct {
	Path string // the shard, relative to the mount root (ctl file only)
	Size uint64 // out: the shard's size, which is the file's
	File string // out: the file's absolute path
}

// DecodeWholeFile decodes a WHOLE_FILE struct; the reply fields are
// decoded too (a client reads them, the daemon ignores them).
func DecodeWholeFile(p []byte) (WholeFileReq, error) {
	var w wholeFields
	if err := decodeFieldsSince(p, wholeSize, &w, wholeSince, 0); err != nil {
		return WholeFileReq{}, err
	}
	path, err := cString(p[wholePathAt : wholePathAt+PathSize])
	if err != nil {
		return WholeFileReq{}, err
	}
	file, err := cString(p[wholeFileAt : wholeFileAt+PathSize])
	if err != nil {
		return WholeFileReq{}, err
	}
	return WholeFileReq{Path: path, Size: w.Size, File: file}, nil
}

func (r WholeFileReq) Encode() ([]byte, error) {
	p := encodeFields(wholeSize, wholeFields{current, r.Size})
	if err := putCString(p[wholePathAt:wholePathAt+PathSize], r.Path); err != nil {
		return nil, fmt.Errorf("shard path: %w", err)
	}
	if err := putCString(p[wholeFileAt:wholeFileAt+PathSize], r.File); err != nil {
		return nil, fmt.Errorf("whole-shard file path: %w", err)
	}
	return p, nil
}
