package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardfs/shardfs/store"
)

const testBlock = 4 * alignment // 16 KiB keeps rings small

// ringSizeFor is a cache size that holds exactly slots blocks of testBlock,
// plus some slack that must be left unused.
func ringSizeFor(slots int64) int64 {
	return geometry{blockSize: testBlock, slots: slots}.fileSize() + testBlock/2
}

// testObject is a shard with deterministic random content.
type testObject struct {
	obj  store.Object
	data []byte
}

func newTestObject(key string, size int64) testObject {
	rng := rand.New(rand.NewPCG(uint64(size), uint64(len(key))*7919+uint64(key[len(key)-1])))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return testObject{
		obj:  store.Object{Key: key, Size: size, ETag: fmt.Sprintf(`"%x"`, checksum(data))},
		data: data,
	}
}

// putAll puts the whole object in parts of partBlocks blocks.
func (o testObject) putAll(c *Cache, partBlocks int64) {
	part := partBlocks * c.BlockSize()
	for off := int64(0); off < o.obj.Size; off += part {
		putRange(c, o.obj, off, o.data[off:min(off+part, o.obj.Size)])
	}
}

// openCache opens cfg and closes it when the test ends.
func openCache(t *testing.T, cfg Config) *Cache {
	t.Helper()
	if cfg.BlockSize == 0 {
		cfg.BlockSize = testBlock
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "mem://test"
	}
	c, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ringConfig is a ring-only config (no RAM tier), so every hit comes from
// the ring.
func ringConfig(dir string, slots int64) Config {
	return Config{Dir: dir, Size: ringSizeFor(slots), BlockSize: testBlock, Namespace: "mem://test"}
}

// mustRead reads [off, off+n) through the cache and fails unless it is
// served with the object's bytes.
func mustRead(t *testing.T, c *Cache, o testObject, off, n int64) {
	t.Helper()
	p := make([]byte, n)
	got, ok := c.ReadAt(o.obj, p, off, ForReadAhead)
	if !ok {
		t.Fatalf("ReadAt(%s, %d, +%d): miss", o.obj.Key, off, n)
	}
	want := o.data[off:min(off+n, o.obj.Size)]
	if got != len(want) || !bytes.Equal(p[:got], want) {
		t.Fatalf("ReadAt(%s, %d, +%d): wrong bytes (n=%d)", o.obj.Key, off, n, got)
	}
}

// mustMiss fails if [off, off+n) is served.
func mustMiss(t *testing.T, c *Cache, o testObject, off, n int64) {
	t.Helper()
	if _, ok := c.ReadAt(o.obj, make([]byte, n), off, ForReadAhead); ok {
		t.Fatalf("ReadAt(%s, %d, +%d): served, want a miss", o.obj.Key, off, n)
	}
}

// slotOf returns the ring slot holding block index of o.
func slotOf(t *testing.T, c *Cache, o testObject, index int64) int64 {
	t.Helper()
	k := blockKey{version: c.cfg.version(o.obj), index: index}
	c.ring.mu.RLock()
	defer c.ring.mu.RUnlock()
	n, ok := c.ring.index[k]
	if !ok {
		t.Fatalf("block %d of %s not in the ring", index, o.obj.Key)
	}
	return n
}

// storedSlot puts o into a cache opened with cfg, closes it, and returns
// the slot that holds block index and the ring's geometry.
func storedSlot(t *testing.T, cfg Config, o testObject, index int64) (int64, geometry) {
	t.Helper()
	c := openCache(t, cfg)
	o.putAll(c, 4)
	n := slotOf(t, c, o, index)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return n, c.ring.geo
}

// has is whether block index of obj is cached where it would survive a
// restart: in the ring when the ring is on, else in the RAM tier.
func has(c *Cache, obj store.Object, index int64) bool {
	if c.liveRing() != nil {
		return c.Lookup(obj, index).Has(InRing)
	}
	return c.Lookup(obj, index).Has(InRAM)
}

// putRange puts data at byte offset off for a random reader; an offset
// that is not a block boundary keeps nothing, as no block starts there.
func putRange(c *Cache, obj store.Object, off int64, data []byte) {
	if off%c.BlockSize() == 0 {
		c.Put(obj, off/c.BlockSize(), data, ForRandomRead)
	}
}

// putAhead is putRange for read-ahead: the ring alone.
func putAhead(c *Cache, obj store.Object, off int64, data []byte) {
	if off%c.BlockSize() == 0 {
		c.Put(obj, off/c.BlockSize(), data, ForReadAhead)
	}
}
