package cache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/cache/internal/aligned"
)

// ringFile is the ring's file, opened so that its I/O does not fill the page
// cache: O_DIRECT where the filesystem allows it, otherwise ordinary I/O
// followed by fadvise(DONTNEED). With O_DIRECT every buffer, offset and
// length is a multiple of alignment; callers use alignedBuffer and alignUp.
//
// paged is the same file through the page cache, for readPaged and
// writePaged alone: a random reader's small reads of blocks the RAM tier
// has no room for come back to the same chunks (the other samples of a
// block), and the kernel keeps those in whatever memory is free, as it does
// for any disk cache. The page cache and O_DIRECT agree on the file: a
// direct read writes dirty pages of its range back first, a direct write
// drops the pages of its range, and every chunk is still checked against
// its CRC on every read.
type ringFile struct {
	f      *os.File
	paged  *os.File
	path   string
	direct bool
}

func openRingFile(path string, flag int) (*ringFile, error) {
	f, err := cachedir.OpenPrivate(path, flag|unix.O_DIRECT)
	if err == nil {
		paged, err := cachedir.OpenPrivate(path, flag&^os.O_CREATE)
		if err != nil {
			f.Close()
			return nil, err
		}
		// readPaged reads whole chunks of random slots: the kernel's
		// read-ahead would only bring in their neighbours.
		_ = unix.Fadvise(int(paged.Fd()), 0, 0, unix.FADV_RANDOM)
		return &ringFile{f: f, paged: paged, path: path, direct: true}, nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return nil, err
	}
	// tmpfs before Linux 6.6 and some network filesystems refuse O_DIRECT.
	f, err = cachedir.OpenPrivate(path, flag)
	if err != nil {
		return nil, err
	}
	// Without read-ahead, dropping exactly the range read leaves nothing behind.
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	return &ringFile{f: f, paged: f, path: path}, nil
}

// readFull fills p from off.
func (r *ringFile) readFull(p []byte, off int64) error {
	err := r.readAt(r.f, p, off)
	if !r.direct {
		_ = unix.Fadvise(int(r.f.Fd()), off, int64(len(p)), unix.FADV_DONTNEED)
	}
	return err
}

// readPaged fills p from off through the page cache, with none of
// O_DIRECT's alignment, and leaves the pages there (see ringFile).
func (r *ringFile) readPaged(p []byte, off int64) error { return r.readAt(r.paged, p, off) }

// readIfPaged fills p from off through the page cache when every byte of
// it is there, and reports whether it did. It asks the page cache first
// (cachestat(2), Linux 6.5): reading a page that is not there would start
// disk I/O for that page alone (even preadv2 with RWF_NOWAIT starts it, and
// a fast disk may finish it before the call returns), where the caller
// reads the page's whole chunk instead. A kernel without cachestat reports
// false, and the caller reads chunks. RWF_NOWAIT still guards the read
// against a page reclaimed since the question.
func (r *ringFile) readIfPaged(p []byte, off int64) bool {
	page := int64(os.Getpagesize())
	lo, hi := off/page*page, (off+int64(len(p))+page-1)/page*page
	var st unix.Cachestat_t
	fd := r.paged.Fd()
	if unix.Cachestat(uint(fd), &unix.CachestatRange{Off: uint64(lo), Len: uint64(hi - lo)}, &st, 0) != nil ||
		int64(st.Cache)*page < hi-lo {
		return false
	}
	n, err := unix.Preadv2(int(fd), [][]byte{p}, off, unix.RWF_NOWAIT)
	return err == nil && n == len(p)
}

// readAt fills p from off of f, one of the ring file's descriptors; a
// short read is an error.
func (r *ringFile) readAt(f *os.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %s at %d: %w", r.path, off, err)
}

// writePaged writes all of p at off through the page cache and leaves
// the pages there, where readPaged finds them (see ringFile).
func (r *ringFile) writePaged(p []byte, off int64) error {
	if _, err := r.paged.WriteAt(p, off); err != nil {
		return fmt.Errorf("write %s at %d: %w", r.path, off, err)
	}
	return nil
}

// writeFull writes all of p at off.
func (r *ringFile) writeFull(p []byte, off int64) error {
	if _, err := r.f.WriteAt(p, off); err != nil {
		return fmt.Errorf("write %s at %d: %w", r.path, off, err)
	}
	if !r.direct {
		// Dirty pages cannot be dropped; write them back first.
		fd := int(r.f.Fd())
		_ = unix.SyncFileRange(fd, off, int64(len(p)), unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		_ = unix.Fadvise(fd, off, int64(len(p)), unix.FADV_DONTNEED)
	}
	return nil
}

func (r *ringFile) sync() error { return r.f.Sync() }

func (r *ringFile) close() error {
	if r.paged != r.f {
		r.paged.Close()
	}
	return r.f.Close()
}

// alignUp rounds n up to a multiple of alignment.
func alignUp(n int64) int64 { return (n + alignment - 1) / alignment * alignment }

// directInto reports whether a ring block can be read straight into p:
// its address and length are multiples of alignment, as O_DIRECT needs.
func directInto(p []byte) bool { return aligned.Is(p) }

// alignedBuffer returns n zeroed bytes whose address is a multiple of
// alignment, as O_DIRECT requires.
func alignedBuffer(n int) []byte { return aligned.Buffer(n) }

// blockPool reuses aligned block buffers for the reads and writes that
// hold one only for the call (a bounce buffer, a block a lease checks), so
// a stream allocates nothing per block.
type blockPool struct{ pool sync.Pool }

func newBlockPool(blockSize int64) *blockPool {
	p := &blockPool{}
	p.pool.New = func() any {
		b := alignedBuffer(int(blockSize))
		return &b
	}
	return p
}

// get returns a buffer of one block; put gives it back.
func (p *blockPool) get() *[]byte { return p.pool.Get().(*[]byte) }

func (p *blockPool) put(b *[]byte) { p.pool.Put(b) }
