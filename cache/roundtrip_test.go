package cache

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// objectSizes covers an empty tail, a short single block, exact multiples
// and a short last block.
var objectSizes = []int64{1, 100, testBlock, testBlock + 1, 3 * testBlock, 5*testBlock - 7, 8*testBlock + 4096}

func manyObjects(prefix string, n int) []testObject {
	var objs []testObject
	for i := range n {
		objs = append(objs, newTestObject(fmt.Sprintf("%s/shard-%03d.tar", prefix, i), objectSizes[i%len(objectSizes)]))
	}
	return objs
}

func TestRoundTripManyObjects(t *testing.T) {
	tiers := map[string]func(t *testing.T) Config{
		"ram and ring": func(t *testing.T) Config { return Config{Dir: t.TempDir(), Size: 16 << 20, MemorySize: 64 << 20} },
		"ring only":    func(t *testing.T) Config { return Config{Dir: t.TempDir(), Size: 16 << 20} },
		"ram only":     func(t *testing.T) Config { return Config{MemorySize: 64 << 20} },
	}
	for name, cfgFor := range tiers {
		t.Run(name, func(t *testing.T) {
			c := openCache(t, cfgFor(t))
			objs := manyObjects("train", 21)
			for i, o := range objs {
				o.putAll(c, int64(1+i%3))
			}
			if c.ram != nil {
				c.ram.cache.Wait() // ristretto applies Sets asynchronously
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for _, o := range objs {
				mustRead(t, c, o, 0, o.obj.Size)
				for range 20 {
					off := rng.Int64N(o.obj.Size)
					mustRead(t, c, o, off, 1+rng.Int64N(2*testBlock))
				}
			}
			st := c.Stats()
			if st.RAMHits+st.RingHits == 0 {
				t.Fatalf("no hits counted: %+v", st)
			}
			if c.ring != nil && st.RingUsedSlots == 0 {
				t.Fatalf("ring holds nothing: %+v", st)
			}
		})
	}
}

func TestReadAtMissesWhatWasNotPut(t *testing.T) {
	c := openCache(t, ringConfig(t.TempDir(), 64))
	o := newTestObject("a/b.tar", 4*testBlock+10)
	putRange(c, o.obj, 0, o.data[:testBlock])
	putRange(c, o.obj, 2*testBlock, o.data[2*testBlock:])

	mustRead(t, c, o, 0, testBlock)
	mustRead(t, c, o, 2*testBlock+5, o.obj.Size)
	mustMiss(t, c, o, testBlock-1, 2) // straddles the missing block 1
	mustMiss(t, c, o, 0, o.obj.Size)

	changed := o
	changed.obj.ETag = `"other"`
	mustMiss(t, c, changed, 0, 10)

	other := openCache(t, Config{Dir: t.TempDir(), Size: ringSizeFor(8), Namespace: "s3://elsewhere"})
	if has(other, o.obj, 0) {
		t.Fatal("a block of another namespace is reported cached")
	}

	// Unaligned puts and short blocks in the middle of an object are not blocks.
	p := newTestObject("c.tar", 3*testBlock)
	putRange(c, p.obj, 10, p.data[10:])
	putRange(c, p.obj, testBlock, p.data[testBlock:testBlock+100])
	if has(c, p.obj, 0) || has(c, p.obj, 1) {
		t.Fatal("an unaligned or short put was cached")
	}

	if n, ok := c.ReadAt(o.obj, make([]byte, 10), o.obj.Size, ForReadAhead); !ok || n != 0 {
		t.Fatalf("ReadAt at EOF = %d, %v; want 0, true", n, ok)
	}
}

func TestReopenRebuildsIndexFromHeaders(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 256)
	c := openCache(t, cfg)
	objs := manyObjects("epoch", 12)
	for _, o := range objs {
		o.putAll(c, 2)
	}
	before := c.Stats()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	c = openCache(t, cfg)
	after := c.Stats()
	if after.RingUsedSlots != before.RingUsedSlots || after.RingBytes != before.RingBytes {
		t.Fatalf("rebuilt ring holds %d slots/%d bytes, had %d/%d",
			after.RingUsedSlots, after.RingBytes, before.RingUsedSlots, before.RingBytes)
	}
	for _, o := range objs {
		mustRead(t, c, o, 0, o.obj.Size)
	}
	if st := c.Stats(); st.RingMisses != 0 || st.RingHits == 0 {
		t.Fatalf("after reopen: %d ring hits, %d misses", st.RingHits, st.RingMisses)
	}

	// Writing resumes after the newest block: the next blocks do not
	// overwrite what was just rebuilt while free slots remain.
	extra := newTestObject("late.tar", 2*testBlock)
	extra.putAll(c, 2)
	if st := c.Stats(); st.Evictions != 0 {
		t.Fatalf("put after reopen evicted %d blocks with free slots left", st.Evictions)
	}
	for _, o := range objs {
		mustRead(t, c, o, 0, o.obj.Size)
	}
}

func TestCloseKeepsCountersAndRingIntact(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Size: ringSizeFor(64), MemorySize: 8 << 20, BlockSize: testBlock, Namespace: "mem://test"}
	c := openCache(t, cfg)
	objs := manyObjects("x", 7)
	for _, o := range objs {
		o.putAll(c, 1)
	}
	c.ram.cache.Wait()
	evictionsBefore := c.Stats().RAMEvictions
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.RAMEvictions != evictionsBefore {
		t.Fatalf("Close counted %d RAM evictions", st.RAMEvictions-evictionsBefore)
	}
	if _, ok := c.ReadAt(objs[0].obj, make([]byte, 1), 0, ForReadAhead); ok {
		t.Fatal("a closed cache served a read")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	c = openCache(t, Config{Dir: dir, Size: cfg.Size, BlockSize: testBlock, Namespace: "mem://test"})
	for _, o := range objs {
		mustRead(t, c, o, 0, o.obj.Size)
	}
}

// A ring filled through a source's bucket serves a source of a prefix in
// it (and the other way round): the cache names an object by its key in
// the bucket, not by its key under the source.
func TestARingWarmedFromTheBucketServesAMountOfItsPrefix(t *testing.T) {
	dir := t.TempDir()
	bucket := ringConfig(dir, 64)
	bucket.Namespace = "s3://b/"
	whole := newTestObject("wds/shard-0.tar", 3*testBlock+7) // its key as a mount of s3://b lists it
	c := openCache(t, bucket)
	whole.putAll(c, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	prefix := bucket
	prefix.KeyPrefix = "wds/"
	under := whole
	under.obj.Key = "shard-0.tar" // the same object as a mount of s3://b/wds lists it
	c = openCache(t, prefix)
	mustRead(t, c, under, 0, under.obj.Size)
	mustRead(t, c, under, testBlock+3, 100)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	other := bucket
	other.KeyPrefix = "other/"
	c = openCache(t, other)
	mustMiss(t, c, under, 0, 10) // s3://b/other/shard-0.tar is another object
}

func TestAKeyPrefixEndsWithASlash(t *testing.T) {
	cfg := ringConfig(t.TempDir(), 64)
	cfg.KeyPrefix = "wds"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"wds"`) {
		t.Fatalf("Validate of key prefix %q = %v; want an error naming it", cfg.KeyPrefix, err)
	}
}
