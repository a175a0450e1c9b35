package cache

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// dirBytes sums the sizes and the allocated bytes of the files in dir.
func dirBytes(t *testing.T, dir string) (size, allocated int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		size += fi.Size()
		allocated += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return size, allocated
}

func TestRingStaysWithinSizeAndEvictsOldestFirst(t *testing.T) {
	dir := t.TempDir()
	const slots = 8
	cfg := ringConfig(dir, slots)
	c := openCache(t, cfg)

	// 30 one-block objects, in order: three and a half times the ring.
	var objs []testObject
	for i := range 30 {
		o := newTestObject(fmt.Sprintf("seq/%02d.tar", i), testBlock)
		objs = append(objs, o)
		o.putAll(c, 1)
		if size, _ := dirBytes(t, dir); size > cfg.Size {
			t.Fatalf("after %d puts the cache dir holds %d bytes, limit %d", i+1, size, cfg.Size)
		}
	}
	size, allocated := dirBytes(t, dir)
	if size > cfg.Size || allocated > cfg.Size {
		t.Fatalf("cache dir: %d bytes, %d allocated; limit %d", size, allocated, cfg.Size)
	}
	for i, o := range objs {
		if i < len(objs)-slots {
			mustMiss(t, c, o, 0, testBlock)
		} else {
			mustRead(t, c, o, 0, testBlock)
		}
	}
	st := c.Stats()
	if st.Evictions != 30-slots || st.RingUsedSlots != slots || st.RingBytes != slots*testBlock {
		t.Fatalf("stats %+v, want %d evictions and %d full slots", st, 30-slots, slots)
	}

	// A bigger write than the whole ring keeps only its tail.
	big := newTestObject("big.tar", 3*slots*testBlock)
	big.putAll(c, 5)
	for i := range int64(3 * slots) {
		if want := i >= 2*slots; has(c, big.obj, i) != want {
			t.Fatalf("block %d of a ring-overflowing object: cached=%v, want %v", i, !want, want)
		}
	}
	mustRead(t, c, big, 2*slots*testBlock, slots*testBlock)
	if size, allocated := dirBytes(t, dir); size > cfg.Size || allocated > cfg.Size {
		t.Fatalf("cache dir: %d bytes, %d allocated; limit %d", size, allocated, cfg.Size)
	}
}

// A ring made with one size (shardfs warm --cache-size 1GiB) is kept by a
// cache that asks for no size (a mount without --cache-size), and never
// emptied silently by one that asks for another: that Open fails, naming
// both sizes, and leaves the ring as it was.
func TestAnExistingRingIsKeptOrRefusedNeverEmptied(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, ringConfig(dir, 32))
	o := newTestObject("g.tar", 4*testBlock)
	o.putAll(c, 4)
	c.Close()

	defaulted := ringConfig(dir, 4)
	c = openCache(t, defaulted)
	if st := c.Stats(); st.RingUsedSlots != 4 || st.RingSlots != 32 {
		t.Fatalf("a cache asking for no size: %+v, want the ring's 32 slots with its 4 blocks", st)
	}
	mustRead(t, c, o, 0, o.obj.Size)
	c.Close()

	for name, cfg := range map[string]Config{
		"another size":       {Dir: dir, Size: ringSizeFor(4), BlockSize: testBlock, SizeGiven: true},
		"another block size": {Dir: dir, Size: ringSizeFor(32), BlockSize: 2 * testBlock},
	} {
		cfg.Namespace = "mem://test"
		_, err := Open(context.Background(), cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "would empty it") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: Open = %v, want one line saying the ring would be emptied", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	given := ringConfig(dir, 32)
	given.SizeGiven = true
	c = openCache(t, given)
	mustRead(t, c, o, 0, o.obj.Size)
	c.Close()

	if err := ClearDir(dir); err != nil {
		t.Fatal(err)
	}
	smaller := ringConfig(dir, 4)
	smaller.SizeGiven = true
	c = openCache(t, smaller)
	if st := c.Stats(); st.RingUsedSlots != 0 || st.RingSlots != 4 {
		t.Fatalf("after clearing: %+v, want an empty ring of 4 slots", st)
	}
	if size, _ := dirBytes(t, dir); size > smaller.Size {
		t.Fatalf("cache dir holds %d bytes, limit %d", size, smaller.Size)
	}
}
