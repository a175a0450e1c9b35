package cache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

// extentBytes reads what a lease's extents point at, straight from the ring
// file, as a cuFile client would.
func extentBytes(t *testing.T, l *Lease) []byte {
	t.Helper()
	var out []byte
	for _, e := range l.Extents() {
		f, err := os.Open(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, e.Length)
		_, err = f.ReadAt(p, e.Offset)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p...)
	}
	return out
}

func TestLeaseExtentsHoldTheShardBytes(t *testing.T) {
	c := openCache(t, ringConfig(t.TempDir(), 32))
	o := newTestObject("lease/a.tar", 6*testBlock-123)
	o.putAll(c, 6) // streamed in order: consecutive slots

	l, err := c.Lease(o.obj, 0, o.obj.Size)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	defer l.Release()
	ext := l.Extents()
	if len(ext) != 1 || ext[0].FileOffset != 0 || ext[0].Length != o.obj.Size {
		t.Fatalf("a shard in consecutive slots gave extents %+v, want one of %d bytes", ext, o.obj.Size)
	}
	if !bytes.Equal(extentBytes(t, l), o.data) {
		t.Fatal("extent bytes differ from the shard")
	}

	// An unaligned sub-range, clipped at the end of the object.
	off, n := int64(testBlock+77), o.obj.Size
	sub, err := c.Lease(o.obj, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Release()
	if got := extentBytes(t, sub); !bytes.Equal(got, o.data[off:]) {
		t.Fatalf("sub-range extents hold %d bytes, not the shard's %d from %d", len(got), len(o.data[off:]), off)
	}
	if e := sub.Extents()[0]; e.FileOffset != off {
		t.Fatalf("first extent starts at shard offset %d, want %d", e.FileOffset, off)
	}
}

func TestLeaseOfScatteredBlocksGivesOneExtentPerRun(t *testing.T) {
	c := openCache(t, ringConfig(t.TempDir(), 32))
	o := newTestObject("lease/b.tar", 4*testBlock)
	filler := newTestObject("filler.tar", testBlock)
	putRange(c, o.obj, 0, o.data[:2*testBlock])
	filler.putAll(c, 1)
	putRange(c, o.obj, 2*testBlock, o.data[2*testBlock:])

	l, err := c.Lease(o.obj, 0, o.obj.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if ext := l.Extents(); len(ext) != 2 || ext[1].FileOffset != 2*testBlock {
		t.Fatalf("extents %+v, want two runs split at block 2", ext)
	}
	if !bytes.Equal(extentBytes(t, l), o.data) {
		t.Fatal("extent bytes differ from the shard")
	}
}

func TestLeaseNeedsEveryBlock(t *testing.T) {
	c := openCache(t, Config{Dir: t.TempDir(), Size: ringSizeFor(16), MemorySize: 1 << 20})
	o := newTestObject("lease/c.tar", 3*testBlock)
	putRange(c, o.obj, 0, o.data[:testBlock])
	putRange(c, o.obj, 2*testBlock, o.data[2*testBlock:])
	if _, err := c.Lease(o.obj, 0, o.obj.Size); !errors.Is(err, ErrNotCached) {
		t.Fatalf("Lease over a missing block = %v, want ErrNotCached", err)
	}
	if st := c.Stats(); st.Leases != 0 {
		t.Fatalf("a refused lease is counted: %d", st.Leases)
	}
	// The refused lease pinned nothing: the ring can still wrap over block 0.
	for i := range 16 {
		newTestObject(fmt.Sprintf("wrap/%d", i), testBlock).putAll(c, 1)
	}
	if has(c, o.obj, 0) {
		t.Fatal("block 0 survived a full wrap: a refused lease left it pinned")
	}

	ramOnly := openCache(t, Config{MemorySize: 1 << 20})
	o.putAll(ramOnly, 3)
	if _, err := ramOnly.Lease(o.obj, 0, 1); !errors.Is(err, ErrNotCached) {
		t.Fatalf("Lease without a ring = %v, want ErrNotCached", err)
	}
}

func TestLeasedSlotsSurviveTheRingWrapping(t *testing.T) {
	const slots = 8
	c := openCache(t, ringConfig(t.TempDir(), slots))
	held := newTestObject("held.tar", 2*testBlock)
	held.putAll(c, 2)
	l, err := c.Lease(held.obj, 0, held.obj.Size)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Leases != 1 {
		t.Fatalf("Leases = %d, want 1", st.Leases)
	}

	// Wrap the ring three times.
	var last []testObject
	for i := range 3 * slots {
		o := newTestObject(fmt.Sprintf("stream/%02d.tar", i), testBlock)
		o.putAll(c, 1)
		last = append(last, o)
	}
	if !bytes.Equal(extentBytes(t, l), held.data) {
		t.Fatal("a leased slot was overwritten while the ring wrapped")
	}
	mustRead(t, c, held, 0, held.obj.Size)
	// The other slots kept turning over: the newest blocks are there.
	for _, o := range last[len(last)-(slots-2):] {
		mustRead(t, c, o, 0, testBlock)
	}

	l.Release()
	l.Release() // idempotent
	if st := c.Stats(); st.Leases != 0 {
		t.Fatalf("Leases = %d after Release, want 0", st.Leases)
	}
	for i := range slots {
		newTestObject(fmt.Sprintf("after/%d.tar", i), testBlock).putAll(c, 1)
	}
	if has(c, held.obj, 0) || has(c, held.obj, 1) {
		t.Fatal("released slots were never reused")
	}
}

func TestFullyLeasedRingRefusesWritesQuietly(t *testing.T) {
	const slots = 4
	c := openCache(t, ringConfig(t.TempDir(), slots))
	o := newTestObject("all.tar", slots*testBlock)
	o.putAll(c, slots)
	l, err := c.Lease(o.obj, 0, o.obj.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	writes := c.Stats().RingWrites
	newTestObject("nowhere.tar", testBlock).putAll(c, 1)
	if st := c.Stats(); st.RingWrites != writes || !st.RingEnabled {
		t.Fatalf("with every slot leased: %+v", st)
	}
	mustRead(t, c, o, 0, o.obj.Size)
}

// A lease hands out no block this process wrote without reading it back:
// a block the device holds wrong since the write is dropped, not leased.
func TestALeaseReadsBackBlocksThisProcessWrote(t *testing.T) {
	o := newTestObject("written.tar", 4*testBlock)
	cfg := ringConfig(t.TempDir(), 8)
	c := openCache(t, cfg)
	o.putAll(c, 4)
	n := slotOf(t, c, o, 1)
	cachetest.PatchFile(t, ringPath(cfg.Dir), c.ring.geo.dataOffset(n)+100, []byte("bit rot"))

	if l, err := c.Lease(o.obj, 0, o.obj.Size); !errors.Is(err, ErrNotCached) {
		if err == nil {
			l.Release()
		}
		t.Fatalf("lease over a block the device holds wrong: %v, want ErrNotCached", err)
	}
	if got := c.Stats().ChecksumFailures; got != 1 {
		t.Fatalf("%d checksum failures, want 1", got)
	}
	l, err := c.Lease(o.obj, 2*testBlock, 2*testBlock)
	if err != nil {
		t.Fatalf("lease of the good blocks: %v", err)
	}
	defer l.Release()
	if !bytes.Equal(extentBytes(t, l), o.data[2*testBlock:]) {
		t.Fatal("leased extents differ from the shard")
	}
}
