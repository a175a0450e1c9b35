package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

// The child side of TestSurvivesKill9: open the cache, put the objects,
// say so, keep writing more until killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("SHARDFS_CACHE_CRASH_CHILD"); dir != "" {
		c, err := Open(context.Background(), ringConfig(dir, 256), nil)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		for _, o := range manyObjects("killed", 9) {
			o.putAll(c, 3)
		}
		os.Stdout.WriteString("ready\n")
		for _, o := range manyObjects("more", 60) {
			o.putAll(c, 2)
		}
		select {} // until SIGKILL
	}
	os.Exit(m.Run())
}

func TestSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	child := cachetest.StartChild(t, "SHARDFS_CACHE_CRASH_CHILD="+dir)

	// While the child owns the dir, nobody else may.
	_, err := Open(context.Background(), ringConfig(dir, 256), nil)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", child.Process.Pid)) {
		t.Fatalf("Open while pid %d owns the dir = %v, want ErrLocked naming it", child.Process.Pid, err)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	// Killed mid-write: what was put before "ready" is all there; of the
	// rest, whatever is served is correct.
	c := openCache(t, ringConfig(dir, 256))
	for _, o := range manyObjects("killed", 9) {
		mustRead(t, c, o, 0, o.obj.Size)
	}
	for _, o := range manyObjects("more", 60) {
		for off := int64(0); off < o.obj.Size; off += testBlock {
			p := make([]byte, testBlock)
			if n, ok := c.ReadAt(o.obj, p, off, ForReadAhead); ok && !bytes.Equal(p[:n], o.data[off:off+int64(n)]) {
				t.Fatalf("%s at %d: wrong bytes served after kill -9", o.obj.Key, off)
			}
		}
	}
}

// A crash while a slot is being rewritten leaves the old header in front of
// new (or half-new) data: that block must miss, its neighbours must hit.
func TestTornSlotIsIgnored(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 16)
	o := newTestObject("torn.tar", 3*testBlock)
	torn, geo := storedSlot(t, cfg, o, 1)

	half := newTestObject("other.tar", testBlock/2)
	cachetest.PatchFile(t, ringPath(dir), geo.dataOffset(torn), half.data)

	c := openCache(t, cfg)
	mustRead(t, c, o, 0, testBlock)
	mustRead(t, c, o, 2*testBlock, testBlock)
	mustMiss(t, c, o, testBlock, testBlock)
	if st := c.Stats(); st.ChecksumFailures != 1 {
		t.Fatalf("checksum failures = %d, want 1", st.ChecksumFailures)
	}
	if has(c, o.obj, 1) {
		t.Fatal("a block that failed its checksum is still indexed")
	}
	// The caller refetches and the block is served again.
	putRange(c, o.obj, testBlock, o.data[testBlock:2*testBlock])
	mustRead(t, c, o, 0, o.obj.Size)
}

// A crash after a new slot's data but before its header leaves data nobody
// can name: the index must not change.
func TestDataWithoutHeaderIsNotIndexed(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 16)
	c := openCache(t, cfg)
	o := newTestObject("kept.tar", 2*testBlock)
	o.putAll(c, 2)
	before := c.Stats().RingUsedSlots
	geo := c.ring.geo
	c.Close()

	orphan := newTestObject("orphan.tar", testBlock)
	cachetest.PatchFile(t, ringPath(dir), geo.dataOffset(5), orphan.data)

	c = openCache(t, cfg)
	if got := c.Stats().RingUsedSlots; got != before {
		t.Fatalf("ring holds %d slots after an orphan write, want %d", got, before)
	}
	if has(c, orphan.obj, 0) {
		t.Fatal("data without a header was indexed")
	}
	mustRead(t, c, o, 0, o.obj.Size)
}

// A ring file cut short mid-slot: blocks wholly before the cut hit, the
// rest miss, and the file is restored to its full, bounded size.
func TestTruncatedRingFile(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 8)
	c := openCache(t, cfg)
	o := newTestObject("cut.tar", 6*testBlock)
	o.putAll(c, 6)
	slots := make([]int64, 6)
	for i := range slots {
		slots[i] = slotOf(t, c, o, int64(i))
	}
	geo := c.ring.geo
	c.Close()

	cut := geo.dataOffset(slots[3]) + testBlock/2
	if err := os.Truncate(ringPath(dir), cut); err != nil {
		t.Fatal(err)
	}
	c = openCache(t, cfg)
	for i, n := range slots {
		complete := geo.dataOffset(n)+testBlock <= cut
		if got := has(c, o.obj, int64(i)); got != complete {
			t.Fatalf("block %d (slot %d): cached=%v, want %v", i, n, got, complete)
		}
		if complete {
			mustRead(t, c, o, int64(i)*testBlock, testBlock)
		} else {
			mustMiss(t, c, o, int64(i)*testBlock, testBlock)
		}
	}
	fi, err := os.Stat(ringPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != geo.fileSize() || fi.Size() > cfg.Size {
		t.Fatalf("ring file is %d bytes, want %d (limit %d)", fi.Size(), geo.fileSize(), cfg.Size)
	}
}
