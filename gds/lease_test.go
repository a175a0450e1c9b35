package gds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

const (
	shard1     = "train/shard-001.tar"
	ringBlock  = 16 << 10
	ringTarget = 1 << 20 // ring bytes: a few dozen 16 KiB slots
)

// newRingFixture is a server whose read path and leases use a real cache
// ring in a temp dir.
func newRingFixture(t *testing.T, cfg Config) (*fixture, *cache.Cache) {
	t.Helper()
	f := newFixture(t, cfg)
	c, err := cache.Open(context.Background(), cache.Config{Dir: t.TempDir(), Size: ringTarget, BlockSize: ringBlock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.files.cache, f.files.bs = c, ringBlock
	cfg.BlockSize = ringBlock
	f.srv = NewServer(cfg, f.files, c, nil, nil)
	t.Cleanup(f.srv.Close)
	return f, c
}

func (f *fixture) lease(handle uint64, obj *store.Object, req LeaseReq) (LeaseReq, syscall.Errno) {
	f.t.Helper()
	return f.leaseAs(handle, uint32(os.Getuid()), obj, req)
}

// leaseAs is lease as uid.
func (f *fixture) leaseAs(handle uint64, uid uint32, obj *store.Object, req LeaseReq) (LeaseReq, syscall.Errno) {
	f.t.Helper()
	out, errno := f.ioctlAs(handle, uid, obj, CmdLease, req)
	if errno != 0 {
		return LeaseReq{}, errno
	}
	r, err := DecodeLeaseReply(out)
	if err != nil {
		f.t.Fatal(err)
	}
	return r, 0
}

// ringBytes reads a lease's extents straight from the cache files, as a
// cuFile client would.
func ringBytes(t *testing.T, r LeaseReq) []byte {
	t.Helper()
	var out []byte
	for _, e := range r.Extents {
		fd, err := os.Open(r.Paths[e.PathIndex])
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, e.Length)
		_, err = fd.ReadAt(b, int64(e.CacheOffset))
		fd.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func TestLeaseExtentsHoldTheFileBytes(t *testing.T) {
	f, c := newRingFixture(t, Config{})
	data := f.data[shard1]
	// Not cached yet: the server reads the range through the mount, then
	// leases it.
	r, errno := f.lease(1, nil, LeaseReq{Path: shard1, FileOffset: 5000, Length: 150_000})
	if errno != 0 {
		t.Fatalf("lease: %v", errno)
	}
	if r.Covered != 150_000 || len(r.Extents) == 0 || r.LeaseID == 0 {
		t.Fatalf("lease reply %+v", r)
	}
	pos := uint64(5000)
	for _, e := range r.Extents {
		if e.FileOffset != pos {
			t.Fatalf("extent at %d, want %d: %+v", e.FileOffset, pos, r.Extents)
		}
		pos += e.Length
	}
	if !bytes.Equal(ringBytes(t, r), data[5000:155_000]) {
		t.Fatal("ring bytes differ from the file")
	}
	// A lease on the shard's own fd, up to the end of the file.
	obj := f.object(shard1)
	tail, errno := f.lease(1, obj, LeaseReq{FileOffset: 190_000, Length: 1 << 20})
	if errno != 0 || tail.Covered != uint64(len(data))-190_000 {
		t.Fatalf("tail lease: %+v, %v", tail, errno)
	}
	if !bytes.Equal(ringBytes(t, tail), data[190_000:]) {
		t.Fatal("tail ring bytes differ")
	}
	if got := c.Stats().Leases; got != 2 {
		t.Errorf("cache holds %d leases, want 2", got)
	}
	if _, errno := f.ioctl(1, nil, CmdLeaseDrop, LeaseDropReq{LeaseID: r.LeaseID}); errno != 0 {
		t.Fatalf("drop: %v", errno)
	}
	if _, errno := f.ioctl(1, nil, CmdLeaseDrop, LeaseDropReq{LeaseID: r.LeaseID}); errno != syscall.ENOENT {
		t.Errorf("second drop: %v, want ENOENT", errno)
	}
	if _, errno := f.ioctl(2, nil, CmdLeaseDrop, LeaseDropReq{LeaseID: tail.LeaseID}); errno != syscall.ENOENT {
		t.Errorf("drop from another handle: %v, want ENOENT", errno)
	}
	f.srv.Release(1)
	if got := c.Stats().Leases; got != 0 {
		t.Errorf("cache holds %d leases after Release, want 0", got)
	}
}

func TestLeasedSlotsSurviveRingWrap(t *testing.T) {
	f, c := newRingFixture(t, Config{})
	data := f.data[shard1]
	r, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: uint64(len(data))})
	if errno != 0 {
		t.Fatalf("lease: %v", errno)
	}
	// Stream a shard several times the ring's size through the cache.
	big := f.object(shard0)
	buf := make([]byte, 64<<10)
	for off := int64(0); off < big.Size; off += int64(len(buf)) {
		if _, err := f.files.ReadAt(context.Background(), *big, buf, off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
	}
	if c.Stats().Evictions == 0 {
		t.Fatal("the ring did not wrap")
	}
	if !bytes.Equal(ringBytes(t, r), data) {
		t.Fatal("leased ring bytes were overwritten")
	}
}

func TestLeaseErrors(t *testing.T) {
	f, _ := newRingFixture(t, Config{MaxLeases: 1})
	cases := []struct {
		req  LeaseReq
		want syscall.Errno
	}{
		{LeaseReq{Path: shard1, FileOffset: 200_000, Length: 1}, syscall.ERANGE},
		{LeaseReq{Path: shard1, FileOffset: 1 << 63, Length: 1}, syscall.ERANGE},
		{LeaseReq{Path: shard1, Length: 0}, syscall.EINVAL},
		{LeaseReq{Path: "nope.tar", Length: 1}, syscall.ENOENT},
		{LeaseReq{Length: 1}, syscall.EINVAL},
	}
	for _, c := range cases {
		if _, errno := f.lease(1, nil, c.req); errno != c.want {
			t.Errorf("%s: %v, want %v", describe(CmdLease, c.req), errno, c.want)
		}
	}
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 10}); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 10}); errno != syscall.EMFILE {
		t.Errorf("lease over the limit: %v, want EMFILE", errno)
	}
	if _, errno := f.lease(2, nil, LeaseReq{Path: shard1, Length: 10}); errno != 0 {
		t.Errorf("the limit is per handle: %v", errno)
	}
}

func TestLeaseWithoutRing(t *testing.T) {
	f := newFixture(t, Config{})
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 10}); errno != syscall.EOPNOTSUPP {
		t.Errorf("lease without a cache: %v, want EOPNOTSUPP", errno)
	}
	var none *cache.Cache
	srv := NewServer(Config{}, f.files, none, nil, nil)
	defer srv.Close()
	in, _ := LeaseReq{Path: shard1, Length: 10}.Encode()
	if _, errno := srv.Ioctl(context.Background(), 1, 0, 1, nil, CmdLease, in, make([]byte, len(in))); errno != syscall.EOPNOTSUPP {
		t.Errorf("lease with a nil *cache.Cache: %v, want EOPNOTSUPP", errno)
	}
}

// fakePin counts releases.
type fakePin struct {
	extents  []cache.Extent
	released *int
}

func (p fakePin) Extents() []cache.Extent { return p.extents }
func (p fakePin) Release()                { *p.released++ }

func TestLeaseNotResidentIsENODATA(t *testing.T) {
	f := newFixture(t, Config{})
	calls := 0
	f.srv.leaseFn = func(store.Object, int64, int64) (pin, error) {
		calls++
		return nil, cache.ErrNotCached
	}
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 100}); errno != syscall.ENODATA {
		t.Errorf("uncacheable range: %v, want ENODATA", errno)
	}
	if calls != 2 {
		t.Errorf("leased %d times, want 2 (before and after warming)", calls)
	}
}

func TestLeaseReplyTruncatesToItsSlots(t *testing.T) {
	f := newFixture(t, Config{})
	released := 0
	// 100 one-block extents scattered over 6 ring files.
	var ext []cache.Extent
	for i := range int64(100) {
		ext = append(ext, cache.Extent{Path: fmt.Sprintf("/ring/%d", i/20), Offset: 4096 * (200 - i), Length: 1000, FileOffset: i * 1000})
	}
	f.srv.leaseFn = func(_ store.Object, off, n int64) (pin, error) {
		return fakePin{extents: ext, released: &released}, nil
	}
	r, errno := f.lease(1, nil, LeaseReq{Path: shard1, FileOffset: 500, Length: 99_500})
	if errno != 0 {
		t.Fatal(errno)
	}
	// 20 extents per path, 4 paths: the first 64 extents fit, starting
	// mid-extent at 500.
	if len(r.Extents) != MaxLeaseExtents || len(r.Paths) != 4 || r.Covered != 64*1000-500 {
		t.Fatalf("reply: %d extents, %d paths, covered %d", len(r.Extents), len(r.Paths), r.Covered)
	}
	if e := r.Extents[0]; e.FileOffset != 500 || e.CacheOffset != 4096*200+500 || e.Length != 500 {
		t.Errorf("first extent not clipped to the range: %+v", e)
	}
	// Five paths needed for 81+ extents: stops at the fifth path.
	ext = ext[:0]
	for i := range int64(10) {
		ext = append(ext, cache.Extent{Path: fmt.Sprintf("/ring/%d", i), Length: 1000, FileOffset: i * 1000})
	}
	r, errno = f.lease(1, nil, LeaseReq{Path: shard1, Length: 10_000})
	if errno != 0 || len(r.Paths) != MaxLeasePaths || r.Covered != 4000 {
		t.Fatalf("path-limited reply: %+v, %v", r, errno)
	}
	// A gap in the cache's extents is a cache bug, reported as EIO, and the
	// pin is given back.
	ext = []cache.Extent{{Path: "/r", Length: 10, FileOffset: 0}, {Path: "/r", Length: 10, FileOffset: 20}}
	if _, errno := f.lease(1, nil, LeaseReq{Path: shard1, Length: 30}); errno != syscall.EIO {
		t.Errorf("gap: %v, want EIO", errno)
	}
	if released != 1 {
		t.Errorf("%d pins released, want 1 (the rejected one)", released)
	}
	f.srv.Release(1)
	if released != 3 {
		t.Errorf("%d pins released after Release, want 3", released)
	}
}

// A length past int64 is a length to the end of the shard, like any other
// length longer than the shard: clipped, never negative.
func TestLeaseLengthPastInt64IsClipped(t *testing.T) {
	f, _ := newRingFixture(t, Config{})
	want := f.data[shard1]
	for _, length := range []uint64{1 << 63, 1<<64 - 1, 1<<63 + 4096} {
		r, errno := f.lease(1, nil, LeaseReq{Path: shard1, FileOffset: 4096, Length: length})
		if errno != 0 {
			t.Fatalf("lease of %d bytes: %v", length, errno)
		}
		if r.Covered == 0 || r.Covered > uint64(len(want))-4096 {
			t.Fatalf("lease of %d bytes covers %d, want 1..%d", length, r.Covered, len(want)-4096)
		}
		if got := ringBytes(t, r); !bytes.Equal(got, want[4096:4096+r.Covered]) {
			t.Fatalf("lease of %d bytes: extents do not hold the shard's bytes", length)
		}
	}
}

// residentFiles says every range is where it says.
type residentFiles struct {
	Files
	where Residency
}

func (r residentFiles) Residency(store.Object, int64, int64) Residency { return r.where }

func TestLeaseUnlessInRAM(t *testing.T) {
	for _, c := range []struct {
		where Residency
		flags uint32
		want  syscall.Errno
	}{
		{ResidentRAM, LeaseUnlessInRAM, syscall.ENODATA}, // READ copies it from memory
		{ResidentRAM, 0, 0}, // without the flag, leased as before
		{ResidentRing, LeaseUnlessInRAM, 0},
	} {
		f, ring := newRingFixture(t, Config{})
		f.srv.Close()
		f.srv = NewServer(Config{BlockSize: ringBlock}, residentFiles{f.files, c.where}, ring, nil, nil)
		t.Cleanup(f.srv.Close)
		r, errno := f.lease(1, nil, LeaseReq{Flags: c.flags, Path: shard1, Length: 4096})
		if errno != c.want {
			t.Errorf("%+v: %v, want %v", c, errno, c.want)
		}
		if errno == 0 && !bytes.Equal(ringBytes(t, r), f.data[shard1][:4096]) {
			t.Errorf("%+v: ring bytes differ from the file", c)
		}
	}
}
