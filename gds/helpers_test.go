package gds

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

// testFiles is a mount's read path over storetest.Mem: cache first when
// there is one, else fetch whole blocks and cache them.
type testFiles struct {
	mem   *storetest.Mem
	cache *cache.Cache
	bs    int64
}

func (f *testFiles) Object(path string) (store.Object, bool) {
	o, err := f.mem.Stat(context.Background(), path)
	return o, err == nil
}

func (f *testFiles) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	if off >= obj.Size {
		return 0, io.EOF
	}
	if f.cache == nil {
		return f.mem.ReadRange(ctx, obj, off, p)
	}
	if n, ok := f.cache.ReadAt(obj, p, off, cache.ForReadAhead); ok {
		return eof(n, len(p))
	}
	start := off / f.bs * f.bs
	end := min((off+int64(len(p))+f.bs-1)/f.bs*f.bs, obj.Size)
	blocks := make([]byte, end-start)
	if _, err := f.mem.ReadRange(ctx, obj, start, blocks); err != nil && err != io.EOF {
		return 0, err
	}
	f.cache.Put(obj, start/f.bs, blocks, cache.ForRandomRead)
	return eof(copy(p, blocks[off-start:]), len(p))
}

func eof(n, want int) (int, error) {
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// randomBytes is deterministic content for a shard of n bytes.
func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// fixture is a server over two shards with no cache ring.
type fixture struct {
	t     testing.TB
	srv   *Server
	mem   *storetest.Mem
	files *testFiles
	data  map[string][]byte
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	mem := storetest.NewMem()
	data := map[string][]byte{
		"train/shard-000.tar": randomBytes(3<<20+123, 1),
		"train/shard-001.tar": randomBytes(200_000, 2),
	}
	for k, v := range data {
		mem.Put(k, v)
	}
	f := &fixture{t: t, mem: mem, files: &testFiles{mem: mem, bs: 1 << 20}, data: data}
	f.srv = NewServer(cfg, f.files, nil, nil, nil)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) object(key string) *store.Object {
	o, ok := f.files.Object(key)
	if !ok {
		f.t.Fatalf("no object %s", key)
	}
	return &o
}

// shmFile creates a buffer file under /dev/shm owned by the running user.
func shmFile(t testing.TB, size int64, mode os.FileMode) string {
	t.Helper()
	f, err := os.CreateTemp("/dev/shm", "shardfs-test-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(mode); err != nil {
		t.Fatal(err)
	}
	return filepath.Base(f.Name())
}

func (f *fixture) ioctl(handle uint64, obj *store.Object, cmd uint32, req interface{ Encode() ([]byte, error) }) ([]byte, syscall.Errno) {
	f.t.Helper()
	return f.ioctlAs(handle, uint32(os.Getuid()), obj, cmd, req)
}

// ioctlAs is ioctl as uid.
func (f *fixture) ioctlAs(handle uint64, uid uint32, obj *store.Object, cmd uint32, req interface{ Encode() ([]byte, error) }) ([]byte, syscall.Errno) {
	f.t.Helper()
	in, err := req.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]byte, len(in))
	_, errno := f.srv.Ioctl(context.Background(), handle, uid, 1, obj, cmd, in, out)
	return out, errno
}

func (f *fixture) register(handle uint64, name string, size uint64) (uint64, syscall.Errno) {
	f.t.Helper()
	out, errno := f.ioctl(handle, nil, CmdRegister, RegisterReq{Name: name, Size: size})
	if errno != 0 {
		return 0, errno
	}
	r, err := DecodeRegister(out)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.BufID, 0
}

func (f *fixture) mustRegister(handle uint64, size int64) (uint64, string) {
	f.t.Helper()
	name := shmFile(f.t, size, 0o600)
	id, errno := f.register(handle, name, uint64(size))
	if errno != 0 {
		f.t.Fatalf("register %s: %v", name, errno)
	}
	return id, name
}

func (f *fixture) read(handle uint64, obj *store.Object, req ReadReq) (uint64, syscall.Errno) {
	f.t.Helper()
	out, errno := f.ioctl(handle, obj, CmdRead, req)
	if errno != 0 {
		return 0, errno
	}
	r, err := DecodeRead(out)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.BytesRead, 0
}

// shmBytes reads what the daemon wrote into a buffer, as the client sees it.
func shmBytes(t testing.TB, name string, off, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	fd, err := os.Open(filepath.Join("/dev/shm", name))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if _, err := fd.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func describe(cmd uint32, req any) string { return fmt.Sprintf("%s %+v", cmdName(cmd), req) }
