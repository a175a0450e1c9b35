package cache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// sharedConfig is a RAM-tier-only cache of slots blocks in a shared arena
// under a test directory.
func sharedConfig(t *testing.T, slots int64) Config {
	return Config{MemorySize: slots * testBlock, BlockSize: testBlock, SharedMemoryDir: t.TempDir()}
}

func putSettled(c *Cache, o testObject) {
	o.putAll(c, 1)
	c.ram.settle()
}

func TestRAMLeaseExtentsHoldTheShardBytes(t *testing.T) {
	cfg := sharedConfig(t, 8)
	c := openCache(t, cfg)
	o := newTestObject("ram/a.tar", 3*testBlock-100)
	putSettled(c, o)

	l, err := c.LeaseRAM(o.obj, 0, o.obj.Size)
	if err != nil {
		t.Fatalf("LeaseRAM of a shard in the tier: %v", err)
	}
	for _, e := range l.Extents() {
		if filepath.Dir(e.Path) != cfg.SharedMemoryDir {
			t.Fatalf("extent in %s, not in the shared memory dir %s", e.Path, cfg.SharedMemoryDir)
		}
	}
	if got := extentBytes(t, l); !bytes.Equal(got, o.data) {
		t.Fatalf("the leased extents hold %d bytes that differ from the shard's %d", len(got), len(o.data))
	}
	l.Release() // leases pin at most half the tier's 8 slots
	off := int64(testBlock + 77)
	sub, err := c.LeaseRAM(o.obj, off, testBlock)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Release()
	if got := extentBytes(t, sub); !bytes.Equal(got, o.data[off:off+testBlock]) {
		t.Fatalf("an unaligned sub-range's extents differ from the shard at %d", off)
	}
	// The tier serves reads and Get as a heap tier does.
	mustRead(t, c, o, 0, o.obj.Size)
	b, tier, ok := c.Get(o.obj, 1, InRAM)
	if !ok || tier != InRAM || !bytes.Equal(b, o.data[testBlock:2*testBlock]) {
		t.Fatalf("Get of block 1 from the shared tier: ok %v tier %v, bytes equal %v", ok, tier, bytes.Equal(b, o.data[testBlock:2*testBlock]))
	}
}

// covered is how many shard bytes a lease's extents cover.
func covered(l *Lease) int64 {
	var n int64
	for _, e := range l.Extents() {
		n += e.Length
	}
	return n
}

func TestRAMLeaseCoversThePrefixTheTierHolds(t *testing.T) {
	heap := Config{MemorySize: 8 * testBlock, BlockSize: testBlock}
	for name, cfg := range map[string]Config{"heap tier": heap, "shared tier": sharedConfig(t, 8)} {
		c := openCache(t, cfg)
		o := newTestObject("ram/b.tar", 3*testBlock)
		c.Put(o.obj, 0, o.data[:testBlock], ForRandomRead)
		c.Put(o.obj, 2, o.data[2*testBlock:], ForRandomRead)
		c.ram.settle()
		l, err := c.LeaseRAM(o.obj, 5, o.obj.Size)
		if name == "heap tier" {
			if !errors.Is(err, ErrNotCached) {
				t.Errorf("heap tier: %v, want ErrNotCached", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("shared tier: lease of a range whose first block is in RAM: %v", err)
		}
		if got := covered(l); got != testBlock-5 || !bytes.Equal(extentBytes(t, l), o.data[5:testBlock]) {
			t.Errorf("shared tier: the lease covers %d bytes, want the %d of the first block, its bytes", got, testBlock-5)
		}
		l.Release()
		if _, err := c.LeaseRAM(o.obj, testBlock, testBlock); !errors.Is(err, ErrNotCached) {
			t.Errorf("shared tier: lease at a block not in RAM: %v, want ErrNotCached", err)
		}
	}
}

// A leased slot keeps its block's bytes after the tier drops the block,
// until the lease is released: a client's DMA never reads another block.
func TestALeasedRAMBlockKeepsItsBytesAfterEviction(t *testing.T) {
	c := openCache(t, sharedConfig(t, 4))
	o := newTestObject("ram/c.tar", testBlock)
	putSettled(c, o)
	l, err := c.LeaseRAM(o.obj, 0, testBlock)
	if err != nil {
		t.Fatal(err)
	}
	k := blockKey{version: c.version(o.obj), index: 0}
	c.ram.cache.Del(k.memKey()) // as an eviction: the slot leaves the index
	c.ram.settle()
	if c.Lookup(o.obj, 0).Has(InRAM) {
		t.Fatal("the deleted block is still in the tier")
	}
	for i := range 8 {
		other := newTestObject("ram/other-"+strconv.Itoa(i)+".tar", testBlock)
		putSettled(c, other)
	}
	if got := extentBytes(t, l); !bytes.Equal(got, o.data) {
		t.Fatal("a leased slot was reused for another block while the lease was held")
	}
	free := c.ram.arena.Free()
	l.Release()
	if got := c.ram.arena.Free(); got != free+1 {
		t.Fatalf("releasing the lease of an evicted block freed %d slots, want 1", got-free)
	}
}

func TestRAMLeasesPinAtMostHalfTheTier(t *testing.T) {
	c := openCache(t, sharedConfig(t, 8))
	o := newTestObject("ram/d.tar", 5*testBlock)
	putSettled(c, o)
	l, err := c.LeaseRAM(o.obj, 0, o.obj.Size)
	if err != nil {
		t.Fatalf("a lease of five of eight blocks: %v", err)
	}
	if got := covered(l); got != 4*testBlock {
		t.Fatalf("a lease of five of eight blocks covers %d bytes, want the four of half the tier", got)
	}
	if _, err := c.LeaseRAM(o.obj, 4*testBlock, testBlock); !errors.Is(err, ErrNotCached) {
		t.Fatalf("a lease past half the tier: %v, want ErrNotCached", err)
	}
	l.Release()
	l2, err := c.LeaseRAM(o.obj, 4*testBlock, testBlock)
	if err != nil {
		t.Fatalf("a lease after the others were released: %v", err)
	}
	l2.Release()
}

// The cache's arena file is in the shared memory dir while the cache is
// open and gone after Close; an arena that cannot be reserved fails Open
// with ErrSharedMemory and leaves nothing behind.
func TestTheArenaFileGoesWithTheCache(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(t.Context(), Config{MemorySize: 4 * testBlock, BlockSize: testBlock, SharedMemoryDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := c.ram.arena.Path()
	if filepath.Dir(path) != dir {
		t.Fatalf("arena file %s, not in the shared memory dir %s", path, dir)
	}
	c.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the arena file outlived Close: %v", err)
	}
	_, err = Open(t.Context(), Config{MemorySize: 1 << 50, BlockSize: 1 << 20, SharedMemoryDir: dir}, nil)
	if !errors.Is(err, ErrSharedMemory) {
		t.Fatalf("an arena larger than its filesystem: %v, want ErrSharedMemory", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Fatalf("a failed open left %v", names)
	}
}

// Readers, leases and puts at once on a tier much smaller than what they
// read: every byte served or leased is the block's own, never another's
// that took its slot.
func TestASharedTierUnderChurnServesEachBlocksOwnBytes(t *testing.T) {
	c := openCache(t, sharedConfig(t, 4))
	objs := make([]testObject, 6)
	for i := range objs {
		objs[i] = newTestObject("churn/"+strconv.Itoa(i)+".tar", 2*testBlock)
	}
	shm, err := os.Open(c.ram.arena.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer shm.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				o := objs[(g+i)%len(objs)]
				index := int64(i % 2)
				want := o.data[index*testBlock : (index+1)*testBlock]
				switch i % 3 {
				case 0:
					c.Put(o.obj, index, want, ForRandomRead)
				case 1:
					if b, _, ok := c.Get(o.obj, index, InRAM); ok && !bytes.Equal(b, want) {
						errs <- "Get served another block's bytes"
					}
					p := make([]byte, 100)
					if _, ok := c.ReadAt(o.obj, p, index*testBlock+7, ForOneShot); ok && !bytes.Equal(p, want[7:107]) {
						errs <- "ReadAt served another block's bytes"
					}
				case 2:
					l, err := c.LeaseRAM(o.obj, index*testBlock, testBlock)
					if err != nil {
						continue
					}
					for _, e := range l.Extents() {
						got := make([]byte, e.Length)
						if _, err := shm.ReadAt(got, e.Offset); err != nil || !bytes.Equal(got, o.data[e.FileOffset:e.FileOffset+e.Length]) {
							errs <- "a leased slot held another block's bytes"
						}
					}
					l.Release()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if n := c.ram.arena.Leased(); n != 0 {
		t.Fatalf("%d slots still counted as leased after every lease was released", n)
	}
}

func TestReadRAMCopiesOnlyFromTheTier(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, Config{Dir: dir, Size: ringSizeFor(16), MemorySize: 4 * testBlock, BlockSize: testBlock, SharedMemoryDir: t.TempDir()})
	o := newTestObject("ram/e.tar", 3*testBlock)
	c.Put(o.obj, 0, o.data[:testBlock], ForRandomRead)
	c.Put(o.obj, 1, o.data[testBlock:2*testBlock], ForReadAhead) // the ring alone
	c.ram.settle()
	p := make([]byte, 100)
	if !c.ReadRAM(o.obj, p, 5) || !bytes.Equal(p, o.data[5:105]) {
		t.Fatal("a read inside a block in RAM was not copied out of its slot")
	}
	if c.ReadRAM(o.obj, p, testBlock+5) {
		t.Error("ReadRAM served a block the ring alone holds")
	}
	if c.ReadRAM(o.obj, p, testBlock-50) {
		t.Error("ReadRAM served a read spanning two blocks")
	}
	if c.ReadRAM(o.obj, p, 2*testBlock) {
		t.Error("ReadRAM served a block nobody cached")
	}
}
