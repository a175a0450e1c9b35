package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
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

// coldBlock drops block index of o from the page cache, so that the next
// small read of it starts cold whatever the page cache held: a test cannot
// know that otherwise (this VM's kernel reclaims idle pages on its own).
func coldBlock(t *testing.T, c *Cache, dir string, o testObject, index int64) {
	t.Helper()
	f, err := os.Open(ringPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	geo := c.ring.geo
	if err := unix.Fadvise(int(f.Fd()), geo.dataOffset(slotOf(t, c, o, index)), geo.blockSize, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// firstRead is readChunks of [off, off+n) of o just after coldBlock: it
// must read the chunks the range lies in (their cost is chunks, and the
// grain table on the slot's first small read), and leave them in the page
// cache for the block's next small reads.
func firstRead(t *testing.T, c *Cache, dir string, o testObject, off, n int64, chunks uint64) {
	t.Helper()
	if got := readChunks(t, c, o, off, n); got != chunks {
		t.Errorf("the first read at %d (+%d): the ring gave %d bytes, want its chunks (and a first table), %d", off, n, got, chunks)
	}
	bs, chunk, page := c.cfg.BlockSize, c.ring.chunk(), int64(os.Getpagesize())
	index := off / bs
	start := (off - index*bs) / chunk * chunk
	end := min(((off-index*bs+n-1)/chunk+1)*chunk, blockLength(o.obj, bs, index))
	end = (end + page - 1) / page * page
	at := c.ring.geo.dataOffset(slotOf(t, c, o, index))
	if r := residentRange(t, ringPath(dir), at+start, end-start); r != end-start {
		t.Errorf("after the first read at %d the page cache holds %d of the %d bytes of its chunks", off, r, end-start)
	}
}

// readChunksWarm is readChunks of bytes an earlier read brought into the
// page cache: when it costs more than want, it reads them once more and
// returns what that cost, since the kernel may have reclaimed the pages in
// between (the second read finds what the first brought back).
func readChunksWarm(t *testing.T, c *Cache, o testObject, off, n int64, want uint64) uint64 {
	t.Helper()
	if got := readChunks(t, c, o, off, n); got == want {
		return got
	}
	return readChunks(t, c, o, off, n)
}

// A small read of a ring block reads and checks the grains it lies in, not
// the block, once the page cache holds them; the first small read of a slot
// also reads the grain table of its header, which later ones find kept; the
// first read of grains the page cache does not hold reads their chunks into
// it (16 KiB test blocks: four grains of 4 KiB, one chunk).
func TestSmallReadsOfARingBlockCostTheirGrains(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	grain := grainSizeFor(testBlock)
	o := newTestObject("grains.tar", 3*testBlock+5000) // a short last block
	o.putAll(c, 4)                                     // written with O_DIRECT: none in the page cache
	for _, tc := range []struct {
		name   string
		off, n int64
		first  bool // the first read of its block: the block is made cold before it
		want   uint64
	}{
		{"100 bytes inside one grain, first", testBlock + grain + 7, 100, true, uint64(testBlock + grainTableBytes)},
		{"100 bytes inside another grain", testBlock + 3*grain + 7, 100, false, uint64(grain)},
		{"a read across two grains", testBlock + 2*grain - 50, 100, false, uint64(2 * grain)},
		{"a whole grain, first", 2 * testBlock, grain, true, uint64(testBlock + grainTableBytes)},
		{"a whole grain", 2*testBlock + grain, grain, false, uint64(grain)},
		{"the short last block's tail, first", 3*testBlock + 4900, 100, true, uint64(5000 + grainTableBytes)},
		{"the short last block's tail", 3*testBlock + 4900, 100, false, uint64(5000 - grain)},
	} {
		if tc.first {
			coldBlock(t, c, dir, o, tc.off/testBlock)
			firstRead(t, c, dir, o, tc.off, tc.n, tc.want)
			continue
		}
		if got := readChunksWarm(t, c, o, tc.off, tc.n, tc.want); got != tc.want {
			t.Errorf("%s: the ring gave %d bytes, want %d", tc.name, got, tc.want)
		}
	}
	if _, ok := c.ReadChunks(o.obj, make([]byte, 200), 2*testBlock-100); ok {
		t.Error("a read across two blocks was served by ReadChunks")
	}

	// A flipped bit in grain 3 of block 1: a read of grain 0 never reads
	// it; a read of grain 3 finds it, and the block is dropped.
	slot := slotOf(t, c, o, 1)
	cachetest.PatchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+3*grain+10, []byte{o.data[testBlock+3*grain+10] ^ 0x10})
	readChunks(t, c, o, testBlock, 100)
	if _, ok := c.ReadChunks(o.obj, make([]byte, 100), testBlock+3*grain); ok {
		t.Fatal("a read of the corrupt grain was served")
	}
	if st := c.Stats(); st.ChecksumFailures != 1 {
		t.Fatalf("checksum failures = %d, want 1", st.ChecksumFailures)
	}
	if _, ok := c.ReadChunks(o.obj, make([]byte, 100), testBlock); ok {
		t.Fatal("the block that failed its check is still served")
	}
	mustMiss(t, c, o, testBlock, 100)
}

// In a ring of 1 MiB blocks, a 4 KiB read costs its 4 KiB grain, where it
// cost a 64 KiB chunk in format 2; the first read of a chunk the page cache
// does not hold reads the chunk, and the first small read of a slot its
// 1 KiB grain table too.
func TestA4KiBReadOfA1MiBRingBlockCosts4KiB(t *testing.T) {
	const bs = 1 << 20
	dir := t.TempDir()
	c := openCache(t, Config{Dir: dir, Size: geometry{blockSize: bs, slots: 4}.fileSize(), BlockSize: bs, Namespace: "mem://test"})
	o := newTestObject("big.tar", 2*bs)
	o.putAll(c, 2)
	read := map[int64]bool{} // blocks read before: their tables are kept
	for _, at := range []int64{0, bs + 37*4096, 2*bs - 4096} {
		chunk := at / (64 << 10) * (64 << 10)
		table := uint64(grainTableBytes)
		if read[at/bs] {
			table = 0
		}
		read[at/bs] = true
		coldBlock(t, c, dir, o, at/bs)
		firstRead(t, c, dir, o, at, 4096, 64<<10+table)
		for _, off := range []int64{chunk, chunk + 15*4096, chunk + 7*4096 + 100} {
			if got := readChunksWarm(t, c, o, off, 4096-off%4096, 4096); got != 4096 {
				t.Errorf("a 4 KiB read at %d: the ring gave %d bytes, want 4096", off, got)
			}
		}
	}
}

// The grain CRCs a small read checks come from the slot's header, which
// only the ring's CRC of the table vouches for: grain bytes rewritten
// together with their CRC in the table (the header's own CRC left stale,
// as bit rot across both would leave it) are never served, and the block
// is dropped.
func TestARewrittenGrainTableIsNeverTrusted(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	grain := grainSizeFor(testBlock)
	o := newTestObject("table.tar", 2*testBlock)
	o.putAll(c, 4)
	slot := slotOf(t, c, o, 1)
	forged := bytes.Repeat([]byte{0xee}, int(grain))
	cachetest.PatchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+2*grain, forged)
	sum := make([]byte, 4)
	binary.LittleEndian.PutUint32(sum, checksum(forged))
	cachetest.PatchFile(t, ringPath(dir), c.ring.geo.headerOffset(slot)+grainTableOffset+4*2, sum)
	p := make([]byte, 100)
	if _, ok := c.ReadChunks(o.obj, p, testBlock+2*grain); ok {
		t.Fatalf("a grain vouched for by a rewritten table was served (bytes % x, the object's % x)", p[:4], o.data[testBlock+2*grain:][:4])
	}
	if st := c.Stats(); st.ChecksumFailures != 1 {
		t.Fatalf("checksum failures = %d, want 1", st.ChecksumFailures)
	}
	mustMiss(t, c, o, testBlock, testBlock)
	mustRead(t, c, o, 0, testBlock)
}

// The chunks a small read of a ring block reads stay in the page cache for
// the block's next small reads, and a slot written again later never serves
// what the page cache held of its earlier block.
func TestSmallRingReadsGoThroughThePageCache(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	grain := grainSizeFor(testBlock)
	first := newTestObject("first.tar", 4*testBlock)
	first.putAll(c, 4)
	slot := slotOf(t, c, first, 2)
	at := c.ring.geo.dataOffset(slot) + grain
	readChunks(t, c, first, 2*testBlock+grain+10, 100)
	if got := residentRange(t, ringPath(dir), at, grain); got != grain {
		t.Fatalf("%d of the %d bytes of the grain just read are in the page cache", got, grain)
	}

	// Sixteen blocks of another object take every slot again.
	second := newTestObject("second.tar", 16*testBlock)
	second.putAll(c, 4)
	for index := range int64(16) {
		if slotOf(t, c, second, index) == slot {
			readChunks(t, c, second, index*testBlock+grain+10, 100)
			return
		}
	}
	t.Fatalf("no block of %s took slot %d", second.obj.Key, slot)
}

// ringWithTwoBlocksOfRAM opens a cache of 16 ring slots and a RAM tier of
// two blocks, and returns it with its directory.
func ringWithTwoBlocksOfRAM(t *testing.T) (*Cache, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := ringConfig(dir, 16)
	cfg.MemorySize = 2 * testBlock
	return openCache(t, cfg), dir
}

// mustBeInThePageCache fails unless the page cache holds all of the ring
// slot of block index of o: a random read's block past a full RAM tier.
func mustBeInThePageCache(t *testing.T, c *Cache, dir string, o testObject, index int64) {
	t.Helper()
	at := c.ring.geo.dataOffset(slotOf(t, c, o, index))
	if got := residentRange(t, ringPath(dir), at, testBlock); got != testBlock {
		t.Fatalf("block %d of %s: %d of its %d bytes are in the page cache after a random read's Put past a full RAM tier", index, o.obj.Key, got, testBlock)
	}
}

// Blocks for random reads that a full RAM tier has no room for are written
// to the ring through the page cache, where their small reads find them;
// the RAM tier's own blocks and read-ahead go to the disk alone, and every
// path reads the same bytes back.
func TestRandomReadBlocksPastAFullRAMTierStayInThePageCache(t *testing.T) {
	c, dir := ringWithTwoBlocksOfRAM(t)
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
		if c.Lookup(random.obj, index).Has(InRAM) {
			if index >= 2 {
				t.Fatalf("block %d is in a RAM tier of two blocks", index)
			}
			continue // the RAM tier's copy is the one read next
		}
		mustBeInThePageCache(t, c, dir, random, index)
	}
	grain := grainSizeFor(testBlock)
	for index := range int64(8) { // a block the RAM tier did not take: its grains from the ring
		if !c.Lookup(random.obj, index).Has(InRAM) {
			readChunks(t, c, random, index*testBlock+grain+3, 100)
			break
		}
	}
	mustRead(t, c, random, 0, random.obj.Size) // O_DIRECT reads of the same slots
	mustRead(t, c, ahead, 0, ahead.obj.Size)
}

// With a ring, a random read's Put past the RAM tier's free room evicts
// nothing: the blocks already in RAM stay there, and the new ones go to
// the ring through the page cache alone (one fresh copy of each, not two).
func TestRandomReadPutPastAFullRAMTierEvictsNothing(t *testing.T) {
	c, dir := ringWithTwoBlocksOfRAM(t)
	first := newTestObject("first.tar", 2*testBlock)
	first.putAll(c, 1)
	for index := range int64(2) {
		if !c.Lookup(first.obj, index).Has(InRAM) {
			t.Fatalf("block %d of the first object is not in a RAM tier with room for it", index)
		}
	}
	next := newTestObject("next.tar", 8*testBlock)
	next.putAll(c, 1)
	for index := range int64(2) {
		if !c.Lookup(first.obj, index).Has(InRAM) {
			t.Fatalf("block %d of the first object was pushed out of RAM by a random read's Put past a full tier", index)
		}
	}
	for index := range int64(8) {
		if c.Lookup(next.obj, index).Has(InRAM) {
			t.Fatalf("block %d of the next object went into a full RAM tier", index)
		}
		mustBeInThePageCache(t, c, dir, next, index)
	}
	mustRead(t, c, next, 0, next.obj.Size)
	mustRead(t, c, first, 0, first.obj.Size)
}

// A whole-block read checks every chunk: a flipped byte in the last one is
// never served.
func TestWholeBlockReadChecksEveryChunk(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 16))
	o := newTestObject("whole.tar", 2*testBlock)
	o.putAll(c, 4)
	slot := slotOf(t, c, o, 0)
	cachetest.PatchFile(t, ringPath(dir), c.ring.geo.dataOffset(slot)+testBlock-1, []byte{o.data[testBlock-1] ^ 1})
	mustMiss(t, c, o, 0, 10)
	mustRead(t, c, o, testBlock, testBlock)
}

// A ring written in an older format (1: one CRC per block; 2: chunk CRCs
// alone) is started empty, with one warning that names the format.
func TestRingOfAnOlderFormatStartsEmptyWithAWarning(t *testing.T) {
	for _, format := range []uint32{1, 2} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			dir := t.TempDir()
			cfg := ringConfig(dir, 8)
			o := newTestObject("old.tar", 2*testBlock)
			storedSlot(t, cfg, o, 0)
			version := make([]byte, 4)
			binary.LittleEndian.PutUint32(version, format)
			cachetest.PatchFile(t, ringPath(dir), 16, version)
			var logs cachetest.LogRecorder
			c, err := Open(context.Background(), cfg, logs.Logger())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if st := c.Stats(); st.RingUsedSlots != 0 {
				t.Fatalf("a format %d ring was opened with %d slots in use", format, st.RingUsedSlots)
			}
			if out := logs.String(); logs.Count("WARN") != 1 || !strings.Contains(out, "another format") ||
				!strings.Contains(out, fmt.Sprintf("format=%d", format)) || !strings.Contains(out, "this_format=3") {
				t.Fatalf("want one warning naming formats %d and 3, got:\n%s", format, out)
			}
			o.putAll(c, 4)
			mustRead(t, c, o, 0, o.obj.Size)
		})
	}
}

// shardfs cache verify checks the grain CRCs as well as the chunk CRCs: a
// header whose grain CRC is wrong (re-signed, so the header itself passes)
// over intact data is reported, and a small read of that grain is not
// served.
func TestVerifyDirChecksGrainCRCs(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 8)
	o := newTestObject("verify.tar", 2*testBlock)
	n, geo := storedSlot(t, cfg, o, 1)
	f, err := os.Open(ringPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, headerSize)
	_, err = f.ReadAt(hdr, geo.headerOffset(n))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	h, st := decodeHeader(hdr, testBlock)
	if st != headerValid {
		t.Fatalf("slot %d's header is not valid (%v)", n, st)
	}
	h.Grains[1] ^= 1
	if err := h.encode(hdr); err != nil {
		t.Fatal(err)
	}
	cachetest.PatchFile(t, ringPath(dir), geo.headerOffset(n), hdr)

	rep, err := VerifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Bad) != 1 || rep.Bad[0].Slot != n || rep.Bad[0].Index != 1 || !strings.Contains(rep.Bad[0].Reason, "CRC32C") {
		t.Fatalf("VerifyDir = %+v, want slot %d (block 1) reported for its CRC32C", rep, n)
	}
	c := openCache(t, cfg)
	readChunks(t, c, o, 100, 100) // the grain CRCs of an intact header, rebuilt at Open
	if _, ok := c.ReadChunks(o.obj, make([]byte, 100), testBlock+grainSizeFor(testBlock)); ok {
		t.Fatal("a small read checked against a wrong grain CRC was served")
	}
	mustRead(t, c, o, 0, testBlock)
}
