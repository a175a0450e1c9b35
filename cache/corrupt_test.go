package cache

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

func TestFlippedBytesAreNeverServed(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 32)
	c := openCache(t, cfg)
	good := newTestObject("good.tar", 4*testBlock)
	bad := newTestObject("dir/bad.tar", 4*testBlock)
	good.putAll(c, 4)
	bad.putAll(c, 4)
	badSlot := slotOf(t, c, bad, 2)
	geo := c.ring.geo

	// Flip one byte under a running cache: the next read notices.
	flipped := []byte{bad.data[2*testBlock+100] ^ 0xff}
	cachetest.PatchFile(t, ringPath(dir), geo.dataOffset(badSlot)+100, flipped)
	mustMiss(t, c, bad, 2*testBlock, 200)
	if st := c.Stats(); st.ChecksumFailures != 1 {
		t.Fatalf("checksum failures = %d, want 1", st.ChecksumFailures)
	}
	mustRead(t, c, good, 0, good.obj.Size)
	mustRead(t, c, bad, 0, 2*testBlock)

	// The caller refetches; the fresh copy lands in another slot and is served.
	bad.putAll(c, 4)
	mustRead(t, c, bad, 0, bad.obj.Size)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := VerifyDir(dir)
	if err != nil {
		t.Fatalf("VerifyDir: %v", err)
	}
	if len(rep.Bad) != 1 {
		t.Fatalf("VerifyDir found %d bad slots, want 1: %+v", len(rep.Bad), rep.Bad)
	}
	b := rep.Bad[0]
	if b.Slot != badSlot || b.Key != "dir/bad.tar" || b.Index != 2 || b.Namespace != "mem://test" ||
		!strings.Contains(b.Reason, "CRC32C") {
		t.Fatalf("bad slot reported as %+v, want slot %d, key dir/bad.tar, block 2, a CRC32C reason", b, badSlot)
	}
	if rep.Good != 8 || rep.Checked != 9 || rep.Slots != 32 {
		t.Fatalf("VerifyDir report %+v, want 8 good of 9 checked in 32 slots", rep)
	}

	// After a restart the stale slot is superseded by the newer copy.
	c = openCache(t, cfg)
	mustRead(t, c, bad, 0, bad.obj.Size)
	if st := c.Stats(); st.ChecksumFailures != 0 {
		t.Fatalf("reopened cache read the corrupt slot: %+v", st)
	}
}

func TestDamagedHeaderDropsItsBlock(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 8)
	o := newTestObject("h.tar", 2*testBlock)
	n, geo := storedSlot(t, cfg, o, 0)

	cachetest.PatchFile(t, ringPath(dir), geo.headerOffset(n)+60, []byte("garbage"))
	rep, err := VerifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Bad) != 1 || rep.Bad[0].Slot != n || !strings.Contains(rep.Bad[0].Reason, "header") {
		t.Fatalf("VerifyDir = %+v, want slot %d reported for its header", rep, n)
	}
	c := openCache(t, cfg)
	mustMiss(t, c, o, 0, testBlock)
	mustRead(t, c, o, testBlock, testBlock)
}

func TestLeaseChecksSlotsLoadedFromDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 8)
	o := newTestObject("gds.tar", 3*testBlock)
	n, geo := storedSlot(t, cfg, o, 1)

	cachetest.PatchFile(t, ringPath(dir), geo.dataOffset(n)+5, []byte{o.data[testBlock+5] ^ 0x55})
	c := openCache(t, cfg)
	if _, err := c.Lease(o.obj, 0, o.obj.Size); !errors.Is(err, ErrNotCached) {
		t.Fatalf("Lease over a corrupt slot = %v, want ErrNotCached", err)
	}
	if st := c.Stats(); st.ChecksumFailures != 1 || st.Leases != 0 {
		t.Fatalf("after the refused lease: %+v", st)
	}
	l, err := c.Lease(o.obj, 2*testBlock, testBlock)
	if err != nil {
		t.Fatalf("Lease of an intact block: %v", err)
	}
	l.Release()
}

func TestWholeBlocksReadStraightIntoTheCallersBufferAreVerified(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 8))
	o := newTestObject("direct.tar", 3*testBlock)
	o.putAll(c, 3)
	cachetest.PatchFile(t, ringPath(dir), c.ring.geo.dataOffset(slotOf(t, c, o, 1))+7, []byte{o.data[testBlock+7] ^ 0xff})

	// An aligned, block-sized buffer is filled by the ring read itself.
	p := alignedBuffer(int(testBlock))
	if !directInto(p) {
		t.Fatal("an aligned block-sized buffer does not take the direct path")
	}
	if n, ok := c.ReadAt(o.obj, p, 0, ForReadAhead); !ok || !bytes.Equal(p[:n], o.data[:testBlock]) {
		t.Fatalf("block 0 read straight into the buffer: ok=%v, bytes equal=%v", ok, bytes.Equal(p[:n], o.data[:testBlock]))
	}
	if _, ok := c.ReadAt(o.obj, p, testBlock, ForReadAhead); ok {
		t.Fatal("a flipped block read straight into the buffer was served")
	}
	if st := c.Stats(); st.ChecksumFailures != 1 {
		t.Fatalf("checksum failures = %d, want 1", st.ChecksumFailures)
	}
}
