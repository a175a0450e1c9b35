package gds

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// Leases taken through many ctl handles (a lease flood) stop at the
// mount's limit: the ring keeps room for new blocks, refusals are counted,
// and every pin comes back when the handles close.
func TestLeaseFloodAcrossHandlesLeavesTheRingRoom(t *testing.T) {
	const limit = 256 << 10 // a quarter of the test ring
	f, c := newRingFixture(t, Config{MaxLeasedBytes: limit, MaxLeasedBytesPerUID: 2 * limit})
	granted, refused := 0, 0
	for h := uint64(1); h <= 64; h++ {
		off := uint64((h % 12) * ringBlock)
		_, errno := f.lease(h, nil, LeaseReq{Path: shard1, FileOffset: off, Length: ringBlock})
		switch errno {
		case 0:
			granted++
		case syscall.ENOSPC:
			refused++
		default:
			t.Fatalf("lease on handle %d: %v", h, errno)
		}
	}
	st := f.srv.Stats()
	if st.LeasedBytes > limit || granted != limit/ringBlock || refused != 64-granted {
		t.Fatalf("%d granted, %d refused, stats %+v; want %d granted within %d bytes", granted, refused, st, limit/ringBlock, limit)
	}
	if st.RefusedMountLimit != uint64(refused) {
		t.Fatalf("%d refusals counted, want %d", st.RefusedMountLimit, refused)
	}
	// The ring still takes new blocks: a whole other shard goes in.
	other := f.data[shard0][:512<<10]
	obj := store.Object{Key: "other.tar", Size: int64(len(other)), ETag: `"o"`}
	c.Put(obj, 0, other, cache.ForRandomRead)
	for i := int64(0); i < obj.Size/ringBlock; i++ {
		if !c.Lookup(obj, i).Has(cache.InRing) {
			t.Fatalf("block %d of a new shard was not cached while leases were held", i)
		}
	}
	for h := uint64(1); h <= 64; h++ {
		f.srv.Release(h)
	}
	if st := f.srv.Stats(); st.Leases != 0 || st.LeasedBytes != 0 {
		t.Fatalf("after every handle closed: %+v", st)
	}
	if n := c.Stats().Leases; n != 0 {
		t.Fatalf("cache still holds %d leases", n)
	}
}

// Buffers registered through many handles stop at the per-uid limit with
// EBUSY, while another user can still register.
func TestRegistrationsArePerUIDLimited(t *testing.T) {
	f := newFixture(t, Config{MaxRegistrationsPerUID: 3})
	for h := uint64(1); h <= 3; h++ {
		f.mustRegister(h, 4096)
	}
	if _, errno := f.register(4, shmFile(t, 4096, 0o600), 4096); errno != syscall.EBUSY {
		t.Fatalf("a fourth buffer for the same uid on a fresh handle: %v, want EBUSY", errno)
	}
	if st := f.srv.Stats(); st.Buffers != 3 || st.RefusedUIDLimit != 1 {
		t.Fatalf("stats %+v, want 3 buffers and 1 refusal", st)
	}
	if os.Geteuid() == 0 {
		other := shmFile(t, 4096, 0o600)
		if err := os.Chown(filepath.Join("/dev/shm", other), 4242, 4242); err != nil {
			t.Fatal(err)
		}
		in, _ := RegisterReq{Name: other, Size: 4096}.Encode()
		if _, errno := f.srv.Ioctl(context.Background(), 5, 4242, 1, nil, CmdRegister, in, make([]byte, len(in))); errno != 0 {
			t.Fatalf("another uid's first buffer: %v", errno)
		}
	}
	f.srv.Release(1)
	if _, errno := f.register(4, shmFile(t, 4096, 0o600), 4096); errno != 0 {
		t.Fatalf("after a handle closed: %v", errno)
	}
}

// The mount's limit on buffers holds across users.
func TestRegistrationsArePerMountLimited(t *testing.T) {
	f := newFixture(t, Config{MaxRegistrationsPerMount: 2})
	f.mustRegister(1, 4096)
	f.mustRegister(2, 4096)
	if _, errno := f.register(3, shmFile(t, 4096, 0o600), 4096); errno != syscall.EBUSY {
		t.Fatalf("a third buffer on the mount: %v, want EBUSY", errno)
	}
	if st := f.srv.Stats(); st.RefusedMountLimit != 1 {
		t.Fatalf("stats %+v, want 1 mount refusal", st)
	}
}
