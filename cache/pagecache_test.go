package cache

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentBytes counts the bytes of path held in the page cache.
func residentBytes(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return residentRange(t, path, 0, fi.Size())
}

// residentRange counts the bytes of [off, off+n) of path (off a multiple of
// the page size) held in the page cache.
func residentRange(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal(errno)
	}
	var resident int64
	for _, v := range vec {
		resident += int64(v & 1)
	}
	return resident * page
}

// Ring I/O must not leave a second copy of the blocks in the page cache.
func TestRingIODoesNotFillThePageCache(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 64)
	c := openCache(t, cfg)
	o := newTestObject("pc.tar", 48*testBlock)
	o.putAll(c, 8)
	for range 3 {
		mustRead(t, c, o, 0, o.obj.Size)
	}
	l, err := c.Lease(o.obj, 0, o.obj.Size)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if got := residentBytes(t, ringPath(dir)); got > testBlock {
		t.Fatalf("%d bytes of the ring file are in the page cache after moving %d through it (direct I/O: %v)",
			got, 4*o.obj.Size, c.ring.file.direct)
	}
}
