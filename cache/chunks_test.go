package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
)

// readChunks reads [off, off+n) of o with ReadChunks and returns how many
// bytes the ring's disk gave for it; it fails unless the bytes are o's.
func readChunks(t *testing.T, c *Cache, o testObject, off, n int64) uint64 {
	t.Helper()
	before := c.Stats().RingBytesRead
	p := make([]byte, n)
	if tier, ok := c.ReadChunks(o.obj, p, off); !ok || tier != InRing {
		t.Fatalf("ReadChunks(%s, %d, +%d) = %v, %v; want a ring hit", o.obj.Key, off, n, tier, ok)
	}
	if !bytes.Equal(p, o.data[off:off+n]) {
		t.Fatalf("ReadChunks(%s, %d, +%d): wrong bytes", o.obj.Key, off, n)
	}
	return c.Stats().RingBytesRead - before
}

// A small read of a ring block reads and checks the chunks it lies in, not
// the block (16 KiB test blocks: four chunks of 4 KiB).
func TestSmallReadsOfARingBlockCostTheirChunks(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	chunk := chunkSizeFor(testBlock)
	o := newTestObject("chunks.tar", 3*testBlock+5000) // a short last block
	o.putAll(c, 4)
	for _, tc := range []struct {
		name   string
		off, n int64
		want   uint64
	}{
		{"100 bytes inside one chunk", testBlock + chunk + 7, 100, uint64(chunk)},
		{"a read across two chunks", testBlock + 2*chunk - 50, 100, uint64(2 * chunk)},
		{"a whole chunk", 2 * testBlock, chunk, uint64(chunk)},
		{"the short last block's tail", 3*testBlock + 4900, 100, uint64(5000 - chunk)},
	} {
		if got := readChunks(t, c, o, tc.off, tc.n); got != tc.want {
			t.Errorf("%s: the ring's disk gave %d bytes, want %d", tc.name, got, tc.want)
		}
	}
	if _, ok := c.ReadChunks(o.obj, make([]byte, 200), 2*testBlock-100); ok {
		t.Error("a read across two blocks was served by ReadChunks")
	}

	// A flipped byte in chunk 3 of block 1: a read of chunk 0 never reads
	// it; a read of chunk 3 finds it, and the block is dropped.
	slot := slotOf(t, c, o, 1)
	patchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+3*chunk+10, []byte{o.data[testBlock+3*chunk+10] ^ 0x5a})
	readChunks(t, c, o, testBlock, 100)
	if _, ok := c.ReadChunks(o.obj, make([]byte, 100), testBlock+3*chunk); ok {
		t.Fatal("a read of the corrupt chunk was served")
	}
	if st := c.Stats(); st.ChecksumFailures != 1 {
		t.Fatalf("checksum failures = %d, want 1", st.ChecksumFailures)
	}
	if _, ok := c.ReadChunks(o.obj, make([]byte, 100), testBlock); ok {
		t.Fatal("the block that failed its check is still served")
	}
	mustMiss(t, c, o, testBlock, 100)
}

// The chunks a small read of a ring block reads stay in the page cache for
// the block's next small reads, and a slot written again later never serves
// what the page cache held of its earlier block.
func TestSmallRingReadsGoThroughThePageCache(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	chunk := chunkSizeFor(testBlock)
	first := newTestObject("first.tar", 4*testBlock)
	first.putAll(c, 4)
	slot := slotOf(t, c, first, 2)
	at := c.ring.geo.dataOffset(slot) + chunk
	readChunks(t, c, first, 2*testBlock+chunk+10, 100)
	if got := residentRange(t, ringPath(dir), at, chunk); got != chunk {
		t.Fatalf("%d of the %d bytes of the chunk just read are in the page cache", got, chunk)
	}

	// Sixteen blocks of another object take every slot again.
	second := newTestObject("second.tar", 16*testBlock)
	second.putAll(c, 4)
	for index := range int64(16) {
		if slotOf(t, c, second, index) == slot {
			readChunks(t, c, second, index*testBlock+chunk+10, 100)
			return
		}
	}
	t.Fatalf("no block of %s took slot %d", second.obj.Key, slot)
}

// Blocks for random reads that a full RAM tier has no room for are written
// to the ring through the page cache, where their small reads find them;
// the RAM tier's own blocks and read-ahead go to the disk alone, and every
// path reads the same bytes back.
func TestRandomReadBlocksPastAFullRAMTierStayInThePageCache(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 16)
	cfg.MemorySize = 2 * testBlock
	c := openCache(t, cfg)
	ahead := newTestObject("ahead.tar", 4*testBlock)
	for off := int64(0); off < ahead.obj.Size; off += 4 * testBlock {
		putAhead(c, ahead.obj, off, ahead.data[off:off+4*testBlock])
	}
	if got := residentBytes(t, ringPath(dir)); got != 0 {
		t.Fatalf("read-ahead left %d bytes of the ring file in the page cache", got)
	}

	random := newTestObject("random.tar", 8*testBlock)
	random.putAll(c, 8) // eight blocks for a RAM tier of two
	for index := range int64(8) {
		at := c.ring.geo.dataOffset(slotOf(t, c, random, index))
		if got := residentRange(t, ringPath(dir), at, testBlock); got != testBlock {
			t.Fatalf("block %d: %d of its %d bytes are in the page cache after a random read's Put past a full RAM tier", index, got, testBlock)
		}
	}
	chunk := chunkSizeFor(testBlock)
	for index := range int64(8) { // a block the RAM tier did not take: its chunks from the ring
		if !c.Lookup(random.obj, index).Has(InRAM) {
			readChunks(t, c, random, index*testBlock+chunk+3, 100)
			break
		}
	}
	mustRead(t, c, random, 0, random.obj.Size) // O_DIRECT reads of the same slots
	mustRead(t, c, ahead, 0, ahead.obj.Size)
}

// A whole-block read checks every chunk: a flipped byte in the last one is
// never served.
func TestWholeBlockReadChecksEveryChunk(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	o := newTestObject("whole.tar", 2*testBlock)
	o.putAll(c, 4)
	slot := slotOf(t, c, o, 0)
	patchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+testBlock-1, []byte{o.data[testBlock-1] ^ 1})
	mustMiss(t, c, o, 0, 10)
	mustRead(t, c, o, testBlock, testBlock)
}

// A ring written in format 1 (one CRC per block) is started empty, with a
// warning that names the format.
func TestRingOfAnOlderFormatStartsEmptyWithAWarning(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 8)
	o := newTestObject("old.tar", 2*testBlock)
	storedSlot(t, cfg, o, 0)
	version := make([]byte, 4)
	binary.LittleEndian.PutUint32(version, 1)
	patchFile(t, ringPath(dir), 16, version)
	var logs logRecorder
	c, err := Open(context.Background(), cfg, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st := c.Stats(); st.RingUsedSlots != 0 {
		t.Fatalf("a format 1 ring was opened with %d slots in use", st.RingUsedSlots)
	}
	if out := logs.String(); logs.count("WARN") != 1 || !strings.Contains(out, "another format") || !strings.Contains(out, "format=1") {
		t.Fatalf("want one warning naming format 1, got:\n%s", out)
	}
	o.putAll(c, 4)
	mustRead(t, c, o, 0, o.obj.Size)
}
