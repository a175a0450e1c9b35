package gds

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The batch ABI (ABI version 2): a client describes many READs as fixed-size
// entries in one of its registered buffers (the queue), starts them with one
// SUBMIT, and learns of each completion from the entry itself: the daemon
// writes the entry's result, then sets its state word. WAIT sleeps until the
// handle has completed a given number of entries. Both structs are small
// enough that the client's ioctl wrapper need not hold any lock of its own
// while the daemon works (CPython's fcntl.ioctl keeps the GIL for a mutable
// buffer above 1 KiB, as a synchronous READ is).
//
// Entry layout (BatchEntrySize bytes, little-endian, at entries_off+i*64):
//
//	 0 u64 user_data   the client's own; never read or written by the daemon
//	 8 u64 file_offset
//	16 u64 length
//	24 u64 buf_id      target buffer, registered on the same handle
//	32 u64 buf_offset
//	40 u32 path_off    offset in the queue buffer of the shard path (no NUL)
//	44 u32 path_len    0: the shard of the fd the batch was submitted on
//	48 i64 result      out: bytes read (short only at the end of the shard), or -errno
//	56 u32 state       out: EntryDone once result is written; the client zeroes it
//	60 u32 reserved    zero
const (
	// EntryDone is the state word of a completed entry.
	EntryDone = 1
	// SubmitWait makes SUBMIT return only once every entry it started has
	// completed: a batched synchronous READ.
	SubmitWait = 1 << 0
	// LeaseUnlessInRAM (a LEASE flag, version 2) refuses with ENODATA a
	// range whose every block is in the RAM tier: READ copies it from
	// memory faster than the client can read the ring's disk.
	LeaseUnlessInRAM = 1 << 0
	// LeaseFromRAM (a LEASE flag, version 3) pins the range in the RAM
	// tier's shared file, which the client maps and registers with CUDA
	// so that the GPU copies the bytes straight from the tier; ENODATA
	// when a block of the range is not in the tier, the tier is not
	// shared, or leases pin half of it already; EACCES for a uid that
	// could not open the file.
	LeaseFromRAM = 1 << 1
)

// The batch wire structs, in the style of abi.go: sizes and offsets are
// constants computed from them, and the command numbers from the sizes.
type (
	// SubmitReq starts Count entries of a queue buffer (_IOWR).
	//
	//	0 u32 version | 4 u32 flags (SubmitWait) | 8 u64 queue_buf_id |
	//	16 u64 entries_off | 24 u32 count | 28 u32 reserved |
	//	32 u64 accepted (out) | 40 u64 completed (out: the handle's completions so far)
	SubmitReq struct {
		Version, Flags         uint32
		QueueBufID, EntriesOff uint64
		Count, Reserved        uint32
		Accepted, Completed    uint64 // out
	}
	// WaitReq sleeps until the handle has completed Target entries since it
	// was opened, or TimeoutMS passes (_IOWR). Completed is the count then.
	//
	//	0 u32 version | 4 u32 flags | 8 u64 target | 16 u32 timeout_ms |
	//	20 u32 reserved | 24 u64 completed (out)
	WaitReq struct {
		Version, Flags      uint32
		Target              uint64
		TimeoutMS, Reserved uint32
		Completed           uint64 // out
	}
	// BatchEntry is one queue entry (layout above).
	BatchEntry struct {
		UserData, FileOffset, Length, BufID, BufOffset uint64
		PathOff, PathLen                               uint32
		Result                                         int64  // out
		State, Reserved                                uint32 // State: out
	}
)

const (
	submitSize = int(unsafe.Sizeof(SubmitReq{})) // 48
	waitSize   = int(unsafe.Sizeof(WaitReq{}))   // 32
	// BatchEntrySize is the size of one queue entry.
	BatchEntrySize = int(unsafe.Sizeof(BatchEntry{})) // 64

	entryResultOff = int(unsafe.Offsetof(BatchEntry{}.Result))
	entryStateOff  = int(unsafe.Offsetof(BatchEntry{}.State))
)

const (
	CmdSubmit = uint32((iocRead|iocWrite)<<30 | submitSize<<16 | IoctlType<<8 | 6)
	CmdWait   = uint32((iocRead|iocWrite)<<30 | waitSize<<16 | IoctlType<<8 | 7)
)

// batchSince is the ABI version that brought the batch commands.
const batchSince = 2

func DecodeSubmit(p []byte) (SubmitReq, error) {
	var r SubmitReq
	if err := decodeFieldsSince(p, submitSize, &r, batchSince, SubmitWait); err != nil {
		return SubmitReq{}, err
	}
	if r.Reserved != 0 {
		return SubmitReq{}, fmt.Errorf("reserved word %#x: %w", r.Reserved, ErrBadField)
	}
	return r, nil
}

func DecodeWait(p []byte) (WaitReq, error) {
	var r WaitReq
	if err := decodeFieldsSince(p, waitSize, &r, batchSince, 0); err != nil {
		return WaitReq{}, err
	}
	if r.Reserved != 0 {
		return WaitReq{}, fmt.Errorf("reserved word %#x: %w", r.Reserved, ErrBadField)
	}
	return r, nil
}

// Encode writes r with the current ABI version and r's flags.
func (r SubmitReq) Encode() ([]byte, error) {
	r.Version = ABIVersion
	return encodeFields(submitSize, r), nil
}

// Encode writes r with the current ABI version and r's flags.
func (r WaitReq) Encode() ([]byte, error) {
	r.Version = ABIVersion
	return encodeFields(waitSize, r), nil
}

func (r *SubmitReq) header() wireHeader { return wireHeader{r.Version, r.Flags} }
func (r *WaitReq) header() wireHeader   { return wireHeader{r.Version, r.Flags} }

// DecodeEntry reads one entry (as the daemon left it in a queue).
func DecodeEntry(p []byte) BatchEntry {
	var e BatchEntry
	binary.Decode(p[:BatchEntrySize], le, &e) // fixed size: cannot fail
	return e
}

// Encode writes e as a client puts it in its queue.
func (e BatchEntry) Encode() []byte { return encodeFields(BatchEntrySize, e) }
