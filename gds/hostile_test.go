package gds

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// smallShm mounts a tmpfs of size bytes, a /dev/shm as small as Docker's
// default is to a large buffer, and returns its path.
func smallShm(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs the tests as root)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=1777"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func fileIn(t *testing.T, dir, name string, size int64, fill bool) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fill {
		if _, err := f.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	} else if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return name
}

// fillUp writes into dir until it is full.
func fillUp(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}

// A sparse buffer larger than what /dev/shm has left would SIGBUS the
// daemon on the first READ that touches a page without memory: REGISTER
// refuses it with ENOSPC instead.
func TestRegisterOfAnUnbackableSparseBufferIsENOSPC(t *testing.T) {
	dir := smallShm(t, "1m")
	f := newFixture(t, Config{ShmDir: dir})
	name := fileIn(t, dir, "sparse", 4<<20, false)
	if _, errno := f.register(1, name, 4<<20); errno != syscall.ENOSPC {
		t.Fatalf("register of 4 MiB sparse on a 1 MiB tmpfs: %v, want ENOSPC", errno)
	}
	small := fileIn(t, dir, "small", 256<<10, false)
	id, errno := f.register(1, small, 256<<10)
	if errno != 0 {
		t.Fatalf("register of a sparse buffer that fits: %v", errno)
	}
	if n, errno := f.read(1, nil, ReadReq{Path: shard0, Length: 256 << 10, BufID: id}); errno != 0 || n != 256<<10 {
		t.Fatalf("read into it: %d, %v", n, errno)
	}
}

// A hole punched into a registered buffer on a full /dev/shm, then a READ
// spanning many ring blocks at an unaligned offset (copied from worker
// goroutines): a clean EFAULT, and the daemon serves right bytes after.
func TestReadIntoAPunchedBufferOnAFullShmFailsCleanly(t *testing.T) {
	dir := smallShm(t, "2m")
	f, _ := newRingFixture(t, Config{ShmDir: dir})
	const size = 512 << 10
	warm := fileIn(t, dir, "warm", size, true)
	wid, errno := f.register(1, warm, size)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := f.read(1, nil, ReadReq{Path: shard0, Length: size, BufID: wid}); errno != 0 {
		t.Fatal(errno) // now every block of the range is in the ring
	}
	name := fileIn(t, dir, "punched", size, true)
	id, errno := f.register(1, name, size)
	if errno != 0 {
		t.Fatal(errno)
	}
	fd, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(fd.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, size); err != nil {
		t.Fatal(err)
	}
	fd.Close()
	fillUp(t, dir)
	if _, errno := f.read(1, nil, ReadReq{Path: shard0, Length: size - 4096, BufOffset: 1, BufID: id}); errno != syscall.EFAULT {
		t.Errorf("read into a punched buffer on a full tmpfs: %v, want EFAULT", errno)
	}
	if n, errno := f.read(1, nil, ReadReq{Path: shard0, Length: size, BufID: wid}); errno != 0 || n != size {
		t.Fatalf("read into a good buffer after: %d, %v", n, errno)
	}
	if got := shmBytesIn(t, dir, warm, 0, size); string(got) != string(f.data[shard0][:size]) {
		t.Fatal("wrong bytes after the faulting read")
	}
}

func shmBytesIn(t *testing.T, dir, name string, off, n int64) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b[off : off+n]
}
