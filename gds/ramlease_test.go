package gds

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// ramFiles is testFiles whose cache leases RAM-tier blocks, as the mount's
// files do when the tier is shared.
type ramFiles struct{ *testFiles }

func (f ramFiles) LeaseRAM(obj store.Object, off, n int64) (*cache.Lease, error) {
	return f.cache.LeaseRAM(obj, off, n)
}

func (f ramFiles) SharesRAM() bool { return true }

// newSharedRAMFixture is a server over a cache with a ring and a shared
// RAM tier (in a temp dir), whose files lease from RAM.
func newSharedRAMFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t, Config{})
	shm := t.TempDir()
	c, err := cache.Open(context.Background(), cache.Config{
		Dir: t.TempDir(), Size: ringTarget, BlockSize: ringBlock,
		MemorySize: 32 * ringBlock, SharedMemoryDir: shm,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.files.cache, f.files.bs = c, ringBlock
	f.srv = NewServer(Config{BlockSize: ringBlock}, ramFiles{f.files}, c, nil, nil)
	t.Cleanup(f.srv.Close)
	return f, shm
}

func TestLeaseFromRAMNamesTheTiersFile(t *testing.T) {
	f, shm := newSharedRAMFixture(t)
	data := f.data[shard1]
	// Not read yet: nothing in RAM, and LEASE_FROM_RAM reads nothing in.
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 50_000, Flags: LeaseFromRAM}); errno != syscall.ENODATA {
		t.Fatalf("LEASE_FROM_RAM of a cold range: %v, want ENODATA", errno)
	}
	// The first four blocks in RAM: a lease of more covers those, and the
	// limits count what it pins.
	if _, err := f.files.ReadAt(context.Background(), *f.object(shard1), make([]byte, 4*ringBlock), 0); err != nil {
		t.Fatal(err)
	}
	r, errno := f.lease(1, nil, LeaseReq{Path: shard1, FileOffset: 5000, Length: 150_000, Flags: LeaseFromRAM})
	if errno != 0 || r.Covered != 4*ringBlock-5000 || string(ringBytes(t, r)) != string(data[5000:4*ringBlock]) {
		t.Fatalf("LEASE_FROM_RAM of a range whose first 4 blocks are in RAM: covers %d (%v), want %d", r.Covered, errno, 4*ringBlock-5000)
	}
	if got := f.srv.Stats().LeasedBytes; got != 4*ringBlock {
		t.Errorf("the prefix lease counts %d bytes against the limits, want the %d it pins", got, 4*ringBlock)
	}
	if _, errno := f.ioctl(1, nil, CmdLeaseDrop, LeaseDropReq{LeaseID: r.LeaseID}); errno != 0 {
		t.Fatal(errno)
	}
	p := make([]byte, len(data))
	if _, err := f.files.ReadAt(context.Background(), *f.object(shard1), p, 0); err != nil {
		t.Fatal(err)
	}
	r, errno = f.lease(1, nil, LeaseReq{Path: shard1, FileOffset: 5000, Length: 150_000, Flags: LeaseFromRAM})
	if errno != 0 {
		t.Fatalf("LEASE_FROM_RAM of a range in RAM: %v", errno)
	}
	for _, path := range r.Paths {
		if filepath.Dir(path) != shm {
			t.Fatalf("a RAM lease names %s, not a file of the shared tier in %s", path, shm)
		}
	}
	if got := ringBytes(t, r); r.Covered != 150_000 || string(got) != string(data[5000:155_000]) {
		t.Fatalf("RAM lease covers %d bytes; its extents' bytes equal the shard's: %v", r.Covered, string(got) == string(data[5000:155_000]))
	}
	if _, errno := f.ioctl(1, nil, CmdLeaseDrop, LeaseDropReq{LeaseID: r.LeaseID}); errno != 0 {
		t.Fatalf("drop of a RAM lease: %v", errno)
	}
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 10, Flags: LeaseFromRAM | LeaseUnlessInRAM}); errno != syscall.EINVAL {
		t.Errorf("both RAM flags: %v, want EINVAL", errno)
	}
	own := uint32(os.Geteuid())
	other := own + 4242
	if own == 0 {
		other = 4242
	}
	if r, errno := f.leaseAs(1, other, nil, LeaseReq{Path: shard1, Length: 10, Flags: LeaseFromRAM}); errno != syscall.EACCES || len(r.Paths) != 0 {
		t.Errorf("another uid: %+v, %v; want EACCES and no path", r, errno)
	}
	var caps Capabilities
	b, _ := f.srv.Capabilities(context.Background())
	if err := json.Unmarshal(b, &caps); err != nil || !caps.RAMLeases {
		t.Errorf("capabilities of a shared tier: ram_leases %v (%v)", caps.RAMLeases, err)
	}
}

func TestLeaseFromRAMWithoutASharedTier(t *testing.T) {
	f, _ := newRingFixture(t, Config{})
	p := make([]byte, 1000)
	if _, err := f.files.ReadAt(context.Background(), *f.object(shard1), p, 0); err != nil {
		t.Fatal(err)
	}
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 1000, Flags: LeaseFromRAM}); errno != syscall.ENODATA {
		t.Fatalf("LEASE_FROM_RAM on a mount whose tier is not shared: %v, want ENODATA", errno)
	}
	var caps Capabilities
	b, _ := f.srv.Capabilities(context.Background())
	if err := json.Unmarshal(b, &caps); err != nil || caps.RAMLeases {
		t.Errorf("capabilities without a shared tier: ram_leases %v (%v)", caps.RAMLeases, err)
	}
}
