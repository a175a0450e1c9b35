package gds

import (
	"fmt"
	"syscall"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// RAMLeaser pins RAM-tier blocks in the tier's shared file (the mount's
// *cache.Cache when its tier is shared). A Files that implements it makes
// LEASE_FROM_RAM available; it fails (cache.ErrNotCached) when a block of
// the range is not in the tier.
type RAMLeaser interface {
	LeaseRAM(obj store.Object, off, n int64) (*cache.Lease, error)
	// SharesRAM says whether the tier is shared at all.
	SharesRAM() bool
}

func ramLeaseFuncOf(files Files) leaseFunc {
	l, ok := files.(RAMLeaser)
	if !ok || !l.SharesRAM() {
		return nil
	}
	return pinsOf(l.LeaseRAM)
}

// pinFromRAM is LEASE_FROM_RAM's pin: the RAM tier's slots, never a read
// of the store or the ring to fill them. A caller of another uid than the
// daemon's (root aside) gets EACCES, as for whole files: the tier's file
// is 0600, so the path would be of no use to it.
func (s *Server) pinFromRAM(uid uint32, o store.Object, off, n int64) (pin, error) {
	if s.ramLeaseFn == nil {
		return nil, fmt.Errorf("no shared RAM tier on this mount: %w", syscall.ENODATA)
	}
	if uid != 0 && uid != s.owner {
		return nil, fmt.Errorf("uid %d cannot open the daemon's (uid %d) RAM tier file: %w", uid, s.owner, syscall.EACCES)
	}
	held, err := s.ramLeaseFn(o, off, n)
	if err != nil {
		return nil, fmt.Errorf("lease %s %d+%d from RAM: %v: %w", o.Key, off, n, err, syscall.ENODATA)
	}
	return held, nil
}
