package prefetch

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// slowFetcher stands in for a remote store: each GET takes a round trip
// plus its size over one connection's bandwidth. It returns no real bytes.
type slowFetcher struct {
	latency     time.Duration
	bytesPerSec float64
}

func (f slowFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	n := int(min(int64(len(p)), obj.Size-off))
	d := f.latency + time.Duration(float64(n)/f.bytesPerSec*float64(time.Second))
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// BenchmarkSequentialRemote reads shards in listing order with 1 MiB
// reads over an emulated remote store (20 ms, 50 MB/s per connection),
// four readers at once, next to the ceiling of the same GETs issued
// directly with the same concurrency. Compare the MB/s figures.
func BenchmarkSequentialRemote(b *testing.B) {
	cfg := DefaultConfig()
	f := slowFetcher{latency: 20 * time.Millisecond, bytesPerSec: 50e6}
	const readers, shardsEach, shardSize = 4, 6, 256 << 20
	objs := make([]store.Object, readers*shardsEach)
	for i := range objs {
		objs[i] = fakeObject(fmt.Sprintf("s%02d", i), shardSize)
	}
	total := int64(len(objs)) * shardSize

	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			sem := make(chan struct{}, cfg.Concurrency)
			buf := make([]byte, cfg.PartSize) // slowFetcher never writes to it
			var wg sync.WaitGroup
			for _, obj := range objs {
				for off := int64(0); off < obj.Size; off += cfg.PartSize {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						f.ReadRange(context.Background(), obj, off, buf)
					})
				}
			}
			wg.Wait()
		}
		b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
	})
	b.Run("stream", func(b *testing.B) {
		for b.Loop() {
			s := NewEngine(cfg, f, nil, nil)
			s.SetOrder(objs)
			var wg sync.WaitGroup
			for r := range readers {
				wg.Go(func() {
					buf := make([]byte, 1<<20)
					for _, obj := range objs[r*shardsEach : (r+1)*shardsEach] {
						st := s.Open(obj)
						for off := int64(0); off < obj.Size; off += int64(len(buf)) {
							if _, err := st.ReadAt(context.Background(), buf, off); err != nil && err != io.EOF {
								b.Error(err)
							}
						}
						st.Close()
					}
				})
			}
			wg.Wait()
			b.Logf("%+v", s.Stats())
			s.Close()
		}
		b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
	})
}

// BenchmarkRandomRead4KiBCached is one FUSE read's share of the read path
// for a random reader whose blocks are all cached: 4 KiB at scattered
// offsets of an object the ring holds and the RAM tier holds half of, as
// in the dense phase of fio's 4k pass. Compare ns/op and allocs/op.
func BenchmarkRandomRead4KiBCached(b *testing.B) {
	const bs, blocks = 1 << 20, 64
	ccfg := cache.DefaultConfig()
	ccfg.Dir, ccfg.Size, ccfg.MemorySize, ccfg.BlockSize, ccfg.SizeGiven = b.TempDir(), 4*blocks*bs, blocks/2*bs, bs, true
	ccfg.Namespace = "test://bench"
	c, err := cache.Open(context.Background(), ccfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	obj := fakeObject("bench.tar", blocks*bs)
	data := wantBytes(obj, 0, int(obj.Size))
	for i := int64(0); i < blocks; i++ {
		c.Put(obj, i, data[i*bs:(i+1)*bs], cache.ForRandomRead)
	}
	s := NewEngine(DefaultConfig(), failingFetcher{}, c, nil)
	defer s.Close()
	r := s.OpenReader(obj, false, 0)
	defer r.Close()
	p := make([]byte, 4096)
	ctx := context.Background()
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for i := int64(0); b.Loop(); i++ {
		off := (i*7919)%blocks*bs + (i*31)%256*4096 + 4096 // never offset 0: random from the first read
		data, _, release, err := r.Read(ctx, p, off)
		if err != nil || len(data) != len(p) {
			b.Fatalf("read at %d: %d bytes, %v", off, len(data), err)
		}
		if release != nil {
			release()
		}
	}
}

// failingFetcher fails every GET: a benchmark that must be served by the
// cache alone says so at once.
type failingFetcher struct{}

func (failingFetcher) ReadRange(context.Context, store.Object, int64, []byte) (int, error) {
	return 0, fmt.Errorf("no GET expected")
}
