package gds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// Leaser pins the cache ring extents that hold a shard range (the mount's
// *cache.Cache). It fails (cache.ErrNotCached) when a block of the range is
// not in the ring.
type Leaser interface {
	Lease(obj store.Object, off, n int64) (*cache.Lease, error)
}

// pin is what the server keeps of a lease: *cache.Lease, or a fake in tests.
type pin interface {
	Extents() []cache.Extent
	Release()
}

// leaseFunc adapts a Leaser; nil when the mount has no ring.
type leaseFunc func(obj store.Object, off, n int64) (pin, error)

func leaseFuncOf(l Leaser) leaseFunc {
	if noCache(l) {
		return nil
	}
	return pinsOf(l.Lease)
}

// pinsOf adapts a cache lease method: a nil *cache.Lease must not become
// a non-nil pin.
func pinsOf(lease func(obj store.Object, off, n int64) (*cache.Lease, error)) leaseFunc {
	return func(obj store.Object, off, n int64) (pin, error) {
		l, err := lease(obj, off, n)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// noCache reports whether l is no cache: nil, or a nil *cache.Cache in
// the interface.
func noCache(l Leaser) bool {
	c, ok := l.(*cache.Cache)
	return l == nil || ok && c == nil
}

// lease handles LEASE: pin the range's cache extents for this handle. A
// range not resident is read through the mount once (which caches it) and
// leased again; when that fails too the caller gets ENODATA and uses READ.
// With LEASE_FROM_RAM the extents lie in the RAM tier's shared file, and a
// range not all there is ENODATA at once.
func (s *Server) lease(ctx context.Context, handle uint64, uid uint32, obj *store.Object, in, out []byte) ([]byte, error) {
	if len(out) < leaseSize {
		return nil, fmt.Errorf("reply room %d bytes: %w", len(out), ErrShortPayload)
	}
	req, err := DecodeLease(in)
	if err != nil {
		return nil, err
	}
	fromRAM := req.Flags&LeaseFromRAM != 0
	if fromRAM && req.Flags&LeaseUnlessInRAM != 0 {
		return nil, fmt.Errorf("LEASE_FROM_RAM with LEASE_UNLESS_IN_RAM: %w", syscall.EINVAL)
	}
	if s.leaseFn == nil && !fromRAM {
		return nil, fmt.Errorf("no cache ring on this mount: %w", syscall.EOPNOTSUPP)
	}
	if req.Length == 0 {
		return nil, fmt.Errorf("zero lease length: %w", syscall.EINVAL)
	}
	o, err := s.resolve(obj, req.Path)
	if err != nil {
		return nil, err
	}
	if req.FileOffset >= uint64(o.Size) {
		return nil, fmt.Errorf("offset %d not inside %s (%d bytes): %w", req.FileOffset, o.Key, o.Size, syscall.ERANGE)
	}
	if s.leaseCount(handle) >= s.cfg.MaxLeases {
		return nil, s.tooManyLeases()
	}
	off := int64(req.FileOffset)
	if req.Flags&LeaseUnlessInRAM != 0 && s.residency(o, req.FileOffset, min(req.Length, uint64(s.cfg.MaxLeaseBytes))) == ResidentRAM {
		return nil, fmt.Errorf("%s at %d is in the RAM tier: %w", o.Key, off, syscall.ENODATA)
	}
	// Clipped in uint64: a length of 2^63 or more is a length to the end
	// of the shard, never a negative one.
	n := int64(min(req.Length, uint64(o.Size-off), uint64(s.cfg.MaxLeaseBytes)))
	// Counted before pinning: the pin (and the warming read behind it) is
	// what the limits are there to bound. The whole blocks a lease pins
	// are counted, not just the bytes asked for.
	bs := s.cfg.BlockSize
	pinned := (off+n+bs-1)/bs*bs - off/bs*bs
	s.mu.Lock()
	err = s.reserveLeaseLocked(uid, pinned)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	unreserve := func() {
		s.mu.Lock()
		s.releaseLeaseLocked(uid, pinned)
		s.mu.Unlock()
	}
	var held pin
	if fromRAM {
		held, err = s.pinFromRAM(uid, o, off, n)
	} else {
		held, err = s.pinRange(ctx, o, off, n)
	}
	if err != nil {
		unreserve()
		return nil, err
	}
	if err := fillLeaseReply(&req, held.Extents(), off, n); err != nil {
		held.Release()
		unreserve()
		return nil, err
	}
	if fromRAM {
		// A RAM lease pins the prefix of the range the tier holds: the
		// limits count the blocks it pinned, not those asked for.
		var got int64
		for _, e := range held.Extents() {
			got += e.Length
		}
		if actual := (off+got+bs-1)/bs*bs - off/bs*bs; actual < pinned {
			s.mu.Lock()
			s.releaseLeaseLocked(uid, pinned-actual)
			s.mu.Unlock()
			pinned = actual
		}
	}
	id := s.nextID.Add(1)
	s.mu.Lock()
	st := s.stateLocked(handle, true)
	if st == nil || len(st.leases) >= s.cfg.MaxLeases {
		s.releaseLeaseLocked(uid, pinned)
		s.mu.Unlock()
		held.Release()
		if st == nil {
			return nil, fmt.Errorf("server closed: %w", syscall.ENODEV)
		}
		return nil, s.tooManyLeases()
	}
	st.leases[id] = leaseHold{pin: held, uid: uid, bytes: pinned}
	s.mu.Unlock()
	req.LeaseID = id
	return req.Encode()
}

// pinRange leases [off, off+n), warming the cache through the read path once
// when the first attempt finds blocks missing.
func (s *Server) pinRange(ctx context.Context, o store.Object, off, n int64) (pin, error) {
	held, err := s.leaseFn(o, off, n)
	if err == nil {
		return held, nil
	}
	if err := s.warm(ctx, o, off, n); err != nil {
		return nil, err
	}
	held, err = s.leaseFn(o, off, n)
	if err != nil {
		return nil, fmt.Errorf("lease %s %d+%d: %v: %w", o.Key, off, n, err, syscall.ENODATA)
	}
	return held, nil
}

// warm reads the range through the mount, block by block, discarding the
// bytes: the read path stores them in the cache.
func (s *Server) warm(ctx context.Context, o store.Object, off, n int64) error {
	scratch := make([]byte, min(n, s.cfg.BlockSize))
	for done := int64(0); done < n; {
		p := scratch[:min(int64(len(scratch)), n-done)]
		got, err := s.files.ReadAt(ctx, o, p, off+done)
		if err != nil && !(errors.Is(err, io.EOF) && got == len(p)) {
			return fmt.Errorf("warm %s at %d: %w", o.Key, off+done, err)
		}
		if got == 0 {
			return fmt.Errorf("warm %s at %d: %w", o.Key, off+done, io.ErrUnexpectedEOF)
		}
		done += int64(got)
	}
	return nil
}

// fillLeaseReply puts the extents covering [off, off+n) into req, clipped
// to the range, stopping where the reply runs out of extent or path slots.
// Extents must tile the range in order; anything else is a cache bug.
func fillLeaseReply(req *LeaseReq, extents []cache.Extent, off, n int64) error {
	pos, end := off, off+n
	req.Extents, req.Paths = nil, nil
	for _, e := range extents {
		if pos == end {
			break
		}
		lo, hi := max(e.FileOffset, pos), min(e.FileOffset+e.Length, end)
		if e.FileOffset > pos || hi <= lo {
			return fmt.Errorf("cache extents do not tile %d+%d at %d: %w", off, n, pos, syscall.EIO)
		}
		idx := pathIndex(req.Paths, e.Path)
		if len(req.Extents) == MaxLeaseExtents || idx == MaxLeasePaths {
			break
		}
		if idx == len(req.Paths) {
			req.Paths = append(req.Paths, e.Path)
		}
		req.Extents = append(req.Extents, LeaseExtent{
			PathIndex:   uint32(idx),
			CacheOffset: uint64(e.Offset + lo - e.FileOffset),
			Length:      uint64(hi - lo),
			FileOffset:  uint64(lo),
		})
		pos = hi
	}
	if pos == off {
		return fmt.Errorf("cache returned no extent for %d+%d: %w", off, n, syscall.EIO)
	}
	req.Covered = uint64(pos - off)
	return nil
}

func pathIndex(paths []string, p string) int {
	for i, q := range paths {
		if q == p {
			return i
		}
	}
	return len(paths)
}

// leaseDrop handles LEASE_DROP.
func (s *Server) leaseDrop(handle uint64, in []byte) error {
	req, err := DecodeLeaseDrop(in)
	if err != nil {
		return err
	}
	s.mu.Lock()
	var p pin
	if st := s.handles[handle]; st != nil {
		if l, ok := st.leases[req.LeaseID]; ok {
			p = l.pin
			delete(st.leases, req.LeaseID)
			s.releaseLeaseLocked(l.uid, l.bytes)
		}
	}
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("lease %d not held on this handle: %w", req.LeaseID, syscall.ENOENT)
	}
	p.Release()
	return nil
}

func (s *Server) leaseCount(handle uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.handles[handle]; st != nil {
		return len(st.leases)
	}
	return 0
}

func (s *Server) tooManyLeases() error {
	return fmt.Errorf("handle holds %d leases already: %w", s.cfg.MaxLeases, syscall.EMFILE)
}
