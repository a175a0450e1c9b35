package gds

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const shard0 = "train/shard-000.tar"

func TestReadIntoRegisteredBuffer(t *testing.T) {
	f := newFixture(t, Config{})
	const bufSize = 4 << 20
	id, name := f.mustRegister(1, bufSize)
	data := f.data[shard0]
	size := int64(len(data))
	cases := []struct{ off, n, bufOff int64 }{
		{0, 4096, 0},
		{1, 1 << 20, 7},             // unaligned both sides, crosses a block
		{size - 100, 100, 8192},     // last bytes
		{size - 100, 4096, 0},       // past the end: short read
		{size, 4096, 0},             // at the end: nothing
		{123456, bufSize - 1, 1},    // fills the buffer to its last byte
		{2 << 20, 8 << 20 / 4, 512}, // 2 MiB in the middle
	}
	for _, c := range cases {
		n, errno := f.read(1, nil, ReadReq{Path: shard0, FileOffset: uint64(c.off), Length: uint64(c.n), BufID: id, BufOffset: uint64(c.bufOff)})
		if errno != 0 {
			t.Fatalf("read %+v: %v", c, errno)
		}
		want := data[c.off:min(c.off+c.n, size)]
		if n != uint64(len(want)) {
			t.Fatalf("read %+v: %d bytes, want %d", c, n, len(want))
		}
		if got := shmBytes(t, name, c.bufOff, int64(n)); !bytes.Equal(got, want) {
			t.Fatalf("read %+v: buffer bytes differ from the file", c)
		}
	}
}

func TestReadOnShardFD(t *testing.T) {
	f := newFixture(t, Config{})
	id, name := f.mustRegister(1, 1<<20)
	obj := f.object("train/shard-001.tar")
	// On a shard's fd the path field is ignored: the fd names the shard.
	n, errno := f.read(1, obj, ReadReq{Path: shard0, FileOffset: 10, Length: 1000, BufID: id})
	if errno != 0 || n != 1000 {
		t.Fatalf("read: %d, %v", n, errno)
	}
	if !bytes.Equal(shmBytes(t, name, 0, 1000), f.data["train/shard-001.tar"][10:1010]) {
		t.Fatal("read the wrong shard")
	}
}

func TestRegisterErrors(t *testing.T) {
	f := newFixture(t, Config{MaxBufferSize: 8 << 20})
	good := shmFile(t, 1<<20, 0o600)
	wideOpen := shmFile(t, 1<<20, 0o644)
	small := shmFile(t, 4096, 0o600)
	link := "shardfs-test-link-" + filepath.Base(t.TempDir())
	if err := os.Symlink(filepath.Join("/dev/shm", good), filepath.Join("/dev/shm", link)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join("/dev/shm", link)) })
	dir := "shardfs-test-dir-" + filepath.Base(t.TempDir())
	os.Mkdir(filepath.Join("/dev/shm", dir), 0o700)
	t.Cleanup(func() { os.Remove(filepath.Join("/dev/shm", dir)) })

	cases := []struct {
		name string
		size uint64
		want syscall.Errno
	}{
		{link, 4096, syscall.ELOOP},
		{wideOpen, 4096, syscall.EPERM},
		{small, 8192, syscall.ERANGE},
		{"shardfs-no-such-file", 4096, syscall.ENOENT},
		{"../etc/passwd", 4096, syscall.EINVAL},
		{"sub/file", 4096, syscall.EINVAL},
		{"..", 4096, syscall.EINVAL},
		{"", 4096, syscall.EINVAL},
		{dir, 4096, syscall.EISDIR},
		{good, 0, syscall.EINVAL},
		{good, 16 << 20, syscall.EFBIG},
	}
	for _, c := range cases {
		if _, errno := f.register(1, c.name, c.size); errno != c.want {
			t.Errorf("register %q size %d: %v, want %v", c.name, c.size, errno, c.want)
		}
	}
	// Another uid's file: the caller is not its owner.
	in, _ := RegisterReq{Name: good, Size: 4096}.Encode()
	out := make([]byte, len(in))
	if _, errno := f.srv.Ioctl(context.Background(), 1, uint32(os.Getuid())+1, 1, nil, CmdRegister, in, out); errno != syscall.EPERM {
		t.Errorf("register another uid's file: %v, want EPERM", errno)
	}
	// The daemon is unharmed: the good file still registers and reads.
	id, errno := f.register(1, good, 1<<20)
	if errno != 0 {
		t.Fatalf("register after errors: %v", errno)
	}
	if n, errno := f.read(1, nil, ReadReq{Path: shard0, Length: 4096, BufID: id}); errno != 0 || n != 4096 {
		t.Fatalf("read after errors: %d, %v", n, errno)
	}
}

func TestReadErrors(t *testing.T) {
	f := newFixture(t, Config{})
	id, _ := f.mustRegister(1, 1<<20)
	other, _ := f.mustRegister(2, 1<<20)
	gone, _ := f.mustRegister(1, 4096)
	if _, errno := f.ioctl(1, nil, CmdUnregister, UnregisterReq{BufID: gone}); errno != 0 {
		t.Fatalf("unregister: %v", errno)
	}
	size := uint64(len(f.data[shard0]))
	cases := []struct {
		req  ReadReq
		want syscall.Errno
	}{
		{ReadReq{Path: shard0, FileOffset: size + 1, Length: 1, BufID: id}, syscall.ERANGE},
		{ReadReq{Path: shard0, FileOffset: 1 << 62, Length: 1, BufID: id}, syscall.ERANGE},
		{ReadReq{Path: shard0, Length: 1<<20 + 1, BufID: id}, syscall.ERANGE},
		{ReadReq{Path: shard0, Length: 1, BufOffset: 1 << 20, BufID: id}, syscall.ERANGE},
		{ReadReq{Path: shard0, Length: 1 << 63, BufOffset: 1 << 63, BufID: id}, syscall.ERANGE},
		{ReadReq{Path: shard0, Length: 1, BufID: 999999}, syscall.EBADF},
		{ReadReq{Path: shard0, Length: 1, BufID: gone}, syscall.EBADF},
		{ReadReq{Path: shard0, Length: 1, BufID: other}, syscall.EBADF},
		{ReadReq{Path: "no/such.tar", Length: 1, BufID: id}, syscall.ENOENT},
		{ReadReq{Path: "", Length: 1, BufID: id}, syscall.EINVAL},
	}
	for _, c := range cases {
		if _, errno := f.read(1, nil, c.req); errno != c.want {
			t.Errorf("%s: %v, want %v", describe(CmdRead, c.req), errno, c.want)
		}
	}
	if _, errno := f.ioctl(1, nil, CmdUnregister, UnregisterReq{BufID: gone}); errno != syscall.EBADF {
		t.Errorf("second unregister: %v, want EBADF", errno)
	}
	if n, errno := f.read(1, nil, ReadReq{Path: shard0, Length: 4096, BufID: id}); errno != 0 || n != 4096 {
		t.Fatalf("read after errors: %d, %v", n, errno)
	}
}

func TestMalformedIoctls(t *testing.T) {
	f := newFixture(t, Config{})
	good, _ := ReadReq{Path: shard0, Length: 1}.Encode()
	ctx := context.Background()
	call := func(cmd uint32, in []byte, outLen int) syscall.Errno {
		_, errno := f.srv.Ioctl(ctx, 1, 0, 1, nil, cmd, in, make([]byte, outLen))
		return errno
	}
	badVersion := append([]byte(nil), good...)
	badVersion[0] = ABIVersion + 1
	flags := append([]byte(nil), good...)
	flags[4] = 1
	cases := map[string]struct {
		errno syscall.Errno
		want  syscall.Errno
	}{
		"unknown command":   {call(CmdRead+1<<16, good, len(good)), syscall.ENOTTY},
		"other ioctl type":  {call(0x80086601, good, len(good)), syscall.ENOTTY}, // FS_IOC_GETFLAGS
		"short input":       {call(CmdRead, good[:100], len(good)), syscall.EINVAL},
		"short output room": {call(CmdRead, good, 100), syscall.EINVAL},
		"ABI version":       {call(CmdRead, badVersion, len(good)), syscall.EPROTO},
		"flags":             {call(CmdRead, flags, len(good)), syscall.EINVAL},
		"empty":             {call(CmdUnregister, nil, 0), syscall.EINVAL},
	}
	for name, c := range cases {
		if c.errno != c.want {
			t.Errorf("%s: %v, want %v", name, c.errno, c.want)
		}
	}
}

func TestTooManyRegistrations(t *testing.T) {
	f := newFixture(t, Config{MaxRegistrations: 2})
	f.mustRegister(1, 4096)
	f.mustRegister(1, 4096)
	if _, errno := f.register(1, shmFile(t, 4096, 0o600), 4096); errno != syscall.EMFILE {
		t.Errorf("third registration: %v, want EMFILE", errno)
	}
	f.mustRegister(2, 4096) // the limit is per handle
}

func TestTruncatedBufferFailsCleanly(t *testing.T) {
	f := newFixture(t, Config{})
	id, name := f.mustRegister(1, 1<<20)
	if err := os.Truncate(filepath.Join("/dev/shm", name), 4096); err != nil {
		t.Fatal(err)
	}
	if _, errno := f.read(1, nil, ReadReq{Path: shard0, Length: 1 << 20, BufID: id}); errno != syscall.EFAULT {
		t.Errorf("read into a truncated buffer: %v, want EFAULT", errno)
	}
}

// mapped reports whether this process maps the shm file name.
func mapped(t *testing.T, name string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(maps), "/dev/shm/"+name)
}

func TestReleaseDropsRegistrations(t *testing.T) {
	f := newFixture(t, Config{})
	id, name := f.mustRegister(1, 1<<20)
	keep, keepName := f.mustRegister(2, 1<<20)
	if !mapped(t, name) {
		t.Fatal("registered buffer is not mapped")
	}
	f.srv.Release(1)
	if mapped(t, name) {
		t.Error("buffer still mapped after Release")
	}
	if _, errno := f.read(1, nil, ReadReq{Path: shard0, Length: 1, BufID: id}); errno != syscall.EBADF {
		t.Errorf("read after Release: %v, want EBADF", errno)
	}
	if n, errno := f.read(2, nil, ReadReq{Path: shard0, Length: 10, BufID: keep}); errno != 0 || n != 10 {
		t.Errorf("other handle after Release: %d, %v", n, errno)
	}
	f.srv.Release(1) // idempotent
	f.srv.Close()
	if mapped(t, keepName) {
		t.Error("buffer still mapped after Close")
	}
	if _, errno := f.read(2, nil, ReadReq{Path: shard0, Length: 10, BufID: keep}); errno != syscall.ENODEV {
		t.Errorf("read after Close: %v, want ENODEV", errno)
	}
}

// Many handles register, read, unregister and release at once; run with
// -race. Every read must still return the file's bytes.
func TestConcurrentHandles(t *testing.T) {
	f := newFixture(t, Config{})
	data := f.data[shard0]
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for h := range uint64(8) {
		handle := h + 1
		id, _ := f.mustRegister(handle, 256<<10)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 20 {
				off := uint64(i) * 64 << 10
				n, errno := f.read(handle, nil, ReadReq{Path: shard0, FileOffset: off, Length: 64 << 10, BufID: id, BufOffset: handle * 1024})
				if errno == syscall.EBADF {
					return // released underneath: the expected end
				}
				if errno != 0 || n != 64<<10 {
					errs <- describe(CmdRead, errno)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			extra, _ := f.mustRegister(handle, 4096)
			f.ioctl(handle, nil, CmdUnregister, UnregisterReq{BufID: extra})
			if handle%2 == 0 {
				f.srv.Release(handle)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// Odd handles were never released: their last read is intact.
	id, name := f.mustRegister(99, 64<<10)
	if _, errno := f.read(99, nil, ReadReq{Path: shard0, FileOffset: 5, Length: 64 << 10, BufID: id}); errno != 0 {
		t.Fatal(errno)
	}
	if !bytes.Equal(shmBytes(t, name, 0, 64<<10), data[5:5+64<<10]) {
		t.Error("bytes differ after concurrent use")
	}
}
