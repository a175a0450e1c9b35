package fs

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// fakeCache holds whole objects and counts the reads it serves.
type fakeCache struct {
	data      map[string][]byte
	blockSize int64
	reads     int
}

func (c *fakeCache) ReadAt(obj store.Object, p []byte, off int64) (int, bool) {
	d, ok := c.data[obj.Key]
	if !ok {
		return 0, false
	}
	c.reads++
	return copy(p, d[off:]), true
}

func (c *fakeCache) Block(obj store.Object, index int64) ([]byte, bool) {
	d, ok := c.data[obj.Key]
	if !ok || index*c.blockSize >= int64(len(d)) {
		return nil, false
	}
	c.reads++
	return d[index*c.blockSize : min((index+1)*c.blockSize, int64(len(d)))], true
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
}
