package fs

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"testing"

	"github.com/shardfs/shardfs/store"
)

type fakeCache struct {
	data      map[string][]byte
	onDisk    map[string]bool
	blockSize int64
	reads     int
}

// fakeCache holds whole objects and counts the blocks it hands out. Objects
// in onDisk are not in its RAM tier.
func (c *fakeCache) MemBlock(obj store.Object, index int64) ([]byte, bool) {
	if c.onDisk[obj.Key] {
		return nil, false
	}
	return c.Block(obj, index)
}

func (c *fakeCache) Block(obj store.Object, index int64) ([]byte, bool) {
	d, ok := c.data[obj.Key]
	if !ok || index*c.blockSize >= int64(len(d)) {
		return nil, false
	}
	c.reads++
	return d[index*c.blockSize : min((index+1)*c.blockSize, int64(len(d)))], true
}

func (c *fakeCache) ReadAtPromoting(obj store.Object, p []byte, off int64) (int, bool) {
	d, ok := c.data[obj.Key]
	if !ok || off >= int64(len(d)) {
		return 0, false
	}
	c.reads += int((off+int64(len(p))-1)/c.blockSize - off/c.blockSize + 1)
	return copy(p, d[off:]), true
}

func (c *fakeCache) PutRange(store.Object, int64, []byte) {}

func TestCacheReaderReadsEachBlockOnce(t *testing.T) {
	const bs = 1 << 20
	data := make([]byte, 3*bs+777)
	rand.New(rand.NewSource(1)).Read(data)
	obj := store.Object{Key: "k", Size: int64(len(data)), ETag: "e"}
	cache := &fakeCache{data: map[string][]byte{"k": data}, blockSize: bs}
	c := newChain(nil, cache, nil, bs)
	h := &readState{obj: obj}
	var got []byte
	for off := int64(0); off < obj.Size; off += 128 << 10 {
		p := make([]byte, 128<<10)
		n, tier, err := c.readAt(context.Background(), h, p, off)
		if err != nil && err != io.EOF {
			t.Fatalf("read at %d: %v", off, err)
		}
		if tier != TierCache {
			t.Fatalf("read at %d served by %s", off, tier)
		}
		got = append(got, p[:n]...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes read through the cache reader differ from the object")
	}
	if cache.reads != 4 {
		t.Fatalf("cache read %d times for 4 blocks read in 128 KiB requests, want 4", cache.reads)
	}
	// A read spanning two blocks goes to the cache directly, still correct.
	p := make([]byte, bs)
	if n, _, err := c.readAt(context.Background(), h, p, bs/2); err != nil || n != bs || !bytes.Equal(p, data[bs/2:bs/2+bs]) {
		t.Fatalf("spanning read = %d, %v", n, err)
	}
	// So is one that ends at the object's short last block.
	p = make([]byte, bs)
	if n, _, err := c.readAt(context.Background(), h, p, 3*bs-500); err != io.EOF || n != 1277 || !bytes.Equal(p[:n], data[3*bs-500:]) {
		t.Fatalf("read to the end = %d, %v", n, err)
	}
}

// fakePrefetcher's streams serve whole objects, lending their bytes in
// place, and count reads, the reads they were told of, and releases.
type fakePrefetcher struct {
	data     map[string][]byte
	reads    int
	observed int
	released int
}

func (f *fakePrefetcher) OpenStream(obj store.Object) Stream { return &fakeStream{f, obj} }
func (f *fakePrefetcher) Hint(...store.Object)               {}

type fakeStream struct {
	f   *fakePrefetcher
	obj store.Object
}

func (s *fakeStream) ReadShared(ctx context.Context, p []byte, off int64) ([]byte, bool, func(), error) {
	s.f.reads++
	d := s.f.data[s.obj.Key]
	data := d[off:min(off+int64(len(p)), int64(len(d)))]
	release := func() { s.f.released++ }
	if len(data) < len(p) {
		return data, true, release, io.EOF
	}
	return data, true, release, nil
}
func (s *fakeStream) Observe(off, n int64) { s.f.observed++ }
func (s *fakeStream) Close()               {}

// TestWithReadAheadTheCacheLinkServesRAMOnly: with a prefetcher, blocks
// the cache has in RAM are served by the cache link (and the stream hears
// of them), while blocks only on disk go to the stream, which reads them
// ahead; the stream's cached answer is reported as the cache tier.
func TestWithReadAheadTheCacheLinkServesRAMOnly(t *testing.T) {
	const bs = 4096
	data := make([]byte, 3*bs)
	rand.New(rand.NewSource(2)).Read(data)
	objects := map[string][]byte{"ram": data, "disk": data}
	cache := &fakeCache{data: objects, onDisk: map[string]bool{"disk": true}, blockSize: bs}
	pf := &fakePrefetcher{data: objects}
	c := newChain(nil, cache, pf, bs)
	for _, key := range []string{"ram", "disk"} {
		h := &readState{obj: store.Object{Key: key, Size: int64(len(data)), ETag: "e"}}
		p := make([]byte, bs)
		n, tier, err := c.readAt(context.Background(), h, p, bs)
		if err != nil || n != bs || !bytes.Equal(p, data[bs:2*bs]) || tier != TierCache {
			t.Fatalf("%s: read = %d, %s, %v, or wrong bytes", key, n, tier, err)
		}
	}
	if pf.reads != 1 || pf.observed != 1 || pf.released != 1 {
		t.Fatalf("stream read %d times, observed %d reads, released %d; want 1, 1, 1 (disk read, RAM hit)", pf.reads, pf.observed, pf.released)
	}
}

func TestOneShotReadsSpanningDiskBlocksComeFromTheCache(t *testing.T) {
	const bs = 1 << 20
	data := make([]byte, 9*bs+123)
	rand.New(rand.NewSource(2)).Read(data)
	obj := store.Object{Key: "k", Size: int64(len(data)), ETag: "e"}
	cache := &fakeCache{data: map[string][]byte{"k": data}, onDisk: map[string]bool{"k": true}, blockSize: bs}
	// No store: a read the cache declined would have nowhere to go.
	c := newOneShotChain(nil, cache, nil, bs)
	for _, tc := range []struct{ off, n int64 }{{0, 8 * bs}, {bs / 2, 3 * bs}, {8 * bs, 2 * bs}} {
		h := &readState{obj: obj}
		p := make([]byte, tc.n)
		n, tier, err := c.readAt(context.Background(), h, p, tc.off)
		if err != nil && err != io.EOF {
			t.Fatalf("read %d+%d: %v", tc.off, tc.n, err)
		}
		if tier != TierCache {
			t.Fatalf("read %d+%d served by %s", tc.off, tc.n, tier)
		}
		if want := data[tc.off:min(tc.off+tc.n, obj.Size)]; !bytes.Equal(p[:n], want) {
			t.Fatalf("read %d+%d: %d bytes differ from the object's %d", tc.off, tc.n, n, len(want))
		}
	}
}
