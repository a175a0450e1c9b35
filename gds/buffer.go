package gds

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// buffer is one registered /dev/shm file, mapped once. READs hold mu for
// reading while they write into mem; close takes it for writing, so the
// mapping never goes away under a copy.
type buffer struct {
	mu  sync.RWMutex
	fd  int // kept open to notice the file shrinking under the mapping
	mem []byte
	uid uint32 // who registered it: its per-uid limit counts it
}

// openBuffer opens, checks and maps name (a file directly in dir) for uid,
// populating the mapping so the first READs do not fault page by page.
// The checks are made on the opened fd, so the file cannot be swapped
// between check and map.
func openBuffer(dir, name string, size int64, uid uint32) (*buffer, error) {
	if err := checkShmName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	b, err := mapChecked(fd, path, size, uid)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return b, nil
}

func mapChecked(fd int, path string, size int64, uid uint32) (*buffer, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file: %w", path, syscall.EINVAL)
	}
	if st.Uid != uid {
		return nil, fmt.Errorf("%s is owned by uid %d, not the caller's %d: %w", path, st.Uid, uid, syscall.EPERM)
	}
	if perm := st.Mode & 0o7777; perm != 0o600 {
		return nil, fmt.Errorf("%s has mode %#o, want 0600: %w", path, perm, syscall.EPERM)
	}
	if st.Size < size {
		return nil, fmt.Errorf("%s holds %d bytes, %d asked: %w", path, st.Size, size, syscall.ERANGE)
	}
	if err := backPages(fd, path, st, size); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &buffer{fd: fd, mem: mem}, nil
}

// backPages makes sure every page of the first size bytes has memory
// behind it. A sparse file (the Python client creates its buffers so) gets
// its pages when they are first written; on a full /dev/shm that write is
// a SIGBUS in the daemon, in the middle of a READ. Allocating them now
// turns that into ENOSPC at REGISTER, charged to the client's tmpfs.
func backPages(fd int, path string, st unix.Stat_t, size int64) error {
	if st.Blocks*512 >= size {
		return nil
	}
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		return fmt.Errorf("allocate the %d bytes of %s: %w", size, path, err)
	}
	return nil
}

// checkShmName accepts one plain file name: no separator, no "..".
func checkShmName(name string) error {
	if name == "" || name == "." || strings.Contains(name, "/") || strings.Contains(name, "..") {
		return fmt.Errorf("shm name %q: %w", name, syscall.EINVAL)
	}
	return nil
}

// stillBacked reports whether the file still covers the mapping: a client
// that truncates its shm file would otherwise turn our copy into SIGBUS.
func (b *buffer) stillBacked() error {
	var st unix.Stat_t
	if err := unix.Fstat(b.fd, &st); err != nil {
		return fmt.Errorf("fstat buffer: %w", err)
	}
	if st.Size < int64(len(b.mem)) {
		return fmt.Errorf("buffer file shrank to %d of %d bytes: %w", st.Size, len(b.mem), syscall.EFAULT)
	}
	if st.Blocks*512 < int64(len(b.mem)) {
		// A hole punched since REGISTER: writing there may need memory
		// /dev/shm no longer has.
		return fmt.Errorf("buffer file has %d of its %d bytes allocated: %w", st.Blocks*512, len(b.mem), syscall.EFAULT)
	}
	return nil
}

// close waits for running copies, then unmaps and closes. Idempotent.
func (b *buffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return
	}
	unix.Munmap(b.mem)
	unix.Close(b.fd)
	b.mem = nil
}

// register handles REGISTER: map the named shm file for this handle.
func (s *Server) register(handle uint64, uid uint32, in, out []byte) ([]byte, error) {
	if len(out) < registerSize {
		return nil, fmt.Errorf("reply room %d bytes: %w", len(out), ErrShortPayload)
	}
	req, err := DecodeRegister(in)
	if err != nil {
		return nil, err
	}
	if req.Size == 0 {
		return nil, fmt.Errorf("zero buffer size: %w", syscall.EINVAL)
	}
	if req.Size > uint64(s.cfg.MaxBufferSize) {
		return nil, fmt.Errorf("buffer of %d bytes, limit %d: %w", req.Size, s.cfg.MaxBufferSize, syscall.EFBIG)
	}
	if s.bufferCount(handle) >= s.cfg.MaxRegistrations {
		return nil, s.tooManyBuffers()
	}
	s.mu.Lock()
	err = s.reserveBufferLocked(uid)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b, err := openBuffer(s.cfg.ShmDir, req.Name, int64(req.Size), uid)
	if err != nil {
		s.mu.Lock()
		s.releaseBufferLocked(uid)
		s.mu.Unlock()
		return nil, err
	}
	b.uid = uid
	id := s.nextID.Add(1)
	s.mu.Lock()
	st := s.stateLocked(handle, true)
	if st == nil || len(st.bufs) >= s.cfg.MaxRegistrations {
		s.releaseBufferLocked(uid)
		s.mu.Unlock()
		b.close()
		if st == nil {
			return nil, fmt.Errorf("server closed: %w", syscall.ENODEV)
		}
		return nil, s.tooManyBuffers()
	}
	st.bufs[id] = b
	s.mu.Unlock()
	req.BufID = id
	return req.Encode()
}

func (s *Server) tooManyBuffers() error {
	return fmt.Errorf("handle holds %d buffers already: %w", s.cfg.MaxRegistrations, syscall.EMFILE)
}

func (s *Server) bufferCount(handle uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.handles[handle]; st != nil {
		return len(st.bufs)
	}
	return 0
}

// unregister handles UNREGISTER.
func (s *Server) unregister(handle uint64, in []byte) error {
	req, err := DecodeUnregister(in)
	if err != nil {
		return err
	}
	s.mu.Lock()
	var b *buffer
	if st := s.handles[handle]; st != nil {
		b = st.bufs[req.BufID]
		delete(st.bufs, req.BufID)
	}
	if b != nil {
		s.releaseBufferLocked(b.uid)
	}
	s.mu.Unlock()
	if b == nil {
		return fmt.Errorf("buffer %d: %w", req.BufID, syscall.EBADF)
	}
	b.close()
	return nil
}

// buffer returns handle's buffer id, or EBADF.
func (s *Server) buffer(handle, id uint64) (*buffer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.handles[handle]; st != nil {
		if b := st.bufs[id]; b != nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("buffer %d not registered on this handle: %w", id, syscall.EBADF)
}
