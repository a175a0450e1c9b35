package gds

import (
	"context"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// memFiles serves bytes already in memory: what a READ costs when the
// cache's RAM tier holds the block, without the cache's own bookkeeping.
type memFiles struct{ data []byte }

func (m memFiles) Object(string) (store.Object, bool) {
	return store.Object{Key: "k", Size: int64(len(m.data))}, true
}

func (m memFiles) ReadAt(_ context.Context, _ store.Object, p []byte, off int64) (int, error) {
	return copy(p, m.data[off:]), nil
}

// BenchmarkRead8MiB: 8 MiB READ ioctls into a registered buffer; compare
// with BenchmarkMemcpy8MiB for the cost of decoding, checks and locking.
func BenchmarkRead8MiB(b *testing.B) {
	const chunk = 8 << 20
	data := randomBytes(64<<20, 3)
	srv := NewServer(Config{}, memFiles{data}, nil, nil, nil)
	defer srv.Close()
	f := &fixture{t: b, srv: srv}
	name := shmFile(f.t, chunk, 0o600)
	id, errno := f.register(1, name, chunk)
	if errno != 0 {
		b.Fatal(errno)
	}
	b.SetBytes(chunk)
	for i := 0; b.Loop(); i++ {
		off := uint64(i%8) * chunk
		if n, errno := f.read(1, nil, ReadReq{Path: "k", FileOffset: off, Length: chunk, BufID: id}); errno != 0 || n != chunk {
			b.Fatal(n, errno)
		}
	}
}

func BenchmarkMemcpy8MiB(b *testing.B) {
	const chunk = 8 << 20
	data := randomBytes(64<<20, 3)
	dst := make([]byte, chunk)
	b.SetBytes(chunk)
	for i := 0; b.Loop(); i++ {
		off := (i % 8) * chunk
		copy(dst, data[off:off+chunk])
	}
}
