package gds

import (
	"fmt"
	"sync/atomic"
	"syscall"
)

// Limits beyond one handle. A client may open the ctl file many times:
// per-handle limits alone would let it pin the whole ring (the write head
// then finds no slot and caching stops) or map buffers until the daemon
// runs out of descriptors or max_map_count. These bound what one uid, and
// the whole mount, holds at once. Refusals are counted by reason.

// usage is what one uid, or the whole mount, holds. Guarded by Server.mu.
type usage struct {
	bufs   int   // registered buffers
	leases int   // leases held
	leased int64 // bytes those leases pin
}

// LimitStats is what the GPU interface holds and has refused.
type LimitStats struct {
	Buffers           int    // buffers registered now, all handles
	Leases            int    // leases held now, all handles
	LeasedBytes       int64  // bytes they pin
	RefusedUIDLimit   uint64 // requests refused by a per-uid limit
	RefusedMountLimit uint64 // requests refused by a per-mount limit
	BatchInFlight     int    // batch entries accepted, not yet completed
	BatchRefused      uint64 // SUBMITs refused by a bound on entries in flight
}

type limitCounters struct {
	uid, mount atomic.Uint64
}

// Stats returns the GPU interface's holdings and refusals.
func (s *Server) Stats() LimitStats {
	inFlight, refused := s.inFlight.stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	return LimitStats{
		BatchInFlight: inFlight, BatchRefused: refused,
		Buffers: s.total.bufs, Leases: s.total.leases, LeasedBytes: s.total.leased,
		RefusedUIDLimit: s.refused.uid.Load(), RefusedMountLimit: s.refused.mount.Load(),
	}
}

func (s *Server) uidUsageLocked(uid uint32) *usage {
	u := s.perUID[uid]
	if u == nil {
		u = &usage{}
		s.perUID[uid] = u
	}
	return u
}

// reserveBufferLocked counts one more buffer for uid, or refuses it: EBUSY.
func (s *Server) reserveBufferLocked(uid uint32) error {
	u := s.uidUsageLocked(uid)
	switch {
	case u.bufs >= s.cfg.MaxRegistrationsPerUID:
		s.refused.uid.Add(1)
		return fmt.Errorf("uid %d holds %d buffers, the per-user limit: %w", uid, u.bufs, syscall.EBUSY)
	case s.total.bufs >= s.cfg.MaxRegistrationsPerMount:
		s.refused.mount.Add(1)
		return fmt.Errorf("the mount holds %d buffers, its limit: %w", s.total.bufs, syscall.EBUSY)
	}
	u.bufs++
	s.total.bufs++
	return nil
}

func (s *Server) releaseBufferLocked(uid uint32) {
	u := s.uidUsageLocked(uid)
	u.bufs--
	s.total.bufs--
	s.forgetIdleLocked(uid, u)
}

// reserveLeaseLocked counts one more lease of n bytes for uid, or refuses
// it: EBUSY for a count, ENOSPC for bytes.
func (s *Server) reserveLeaseLocked(uid uint32, n int64) error {
	u := s.uidUsageLocked(uid)
	switch {
	case u.leases >= s.cfg.MaxLeasesPerUID:
		s.refused.uid.Add(1)
		return fmt.Errorf("uid %d holds %d leases, the per-user limit: %w", uid, u.leases, syscall.EBUSY)
	case u.leased+n > s.cfg.MaxLeasedBytesPerUID:
		s.refused.uid.Add(1)
		return fmt.Errorf("uid %d pins %d bytes of the ring, %d more would pass the per-user limit %d: %w", uid, u.leased, n, s.cfg.MaxLeasedBytesPerUID, syscall.ENOSPC)
	case s.total.leased+n > s.cfg.MaxLeasedBytes:
		s.refused.mount.Add(1)
		return fmt.Errorf("leases pin %d bytes of the ring, %d more would pass the mount's limit %d: %w", s.total.leased, n, s.cfg.MaxLeasedBytes, syscall.ENOSPC)
	}
	u.leases++
	u.leased += n
	s.total.leases++
	s.total.leased += n
	return nil
}

func (s *Server) releaseLeaseLocked(uid uint32, n int64) {
	u := s.uidUsageLocked(uid)
	u.leases--
	u.leased -= n
	s.total.leases--
	s.total.leased -= n
	s.forgetIdleLocked(uid, u)
}

// forgetIdleLocked drops a uid that holds nothing, so the map stays as
// small as the set of users holding something.
func (s *Server) forgetIdleLocked(uid uint32, u *usage) {
	if *u == (usage{}) {
		delete(s.perUID, uid)
	}
}

// releaseStateLocked gives back everything a detached handle state held.
func (s *Server) releaseStateLocked(st *handleState) {
	if st == nil {
		return
	}
	for _, b := range st.bufs {
		s.releaseBufferLocked(b.uid)
	}
	for _, l := range st.leases {
		s.releaseLeaseLocked(l.uid, l.bytes)
	}
}
