package cache

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wholeConfig is a ring of slots blocks beside whole-shard files of about
// the same size (half of the cache each).
func wholeConfig(dir string, slots int64) Config {
	cfg := ringConfig(dir, slots)
	cfg.WholeShardPercent = 50
	cfg.Size = sizeForRing(cfg.Size, cfg.WholeShardPercent)
	cfg.SizeGiven = true
	return cfg
}

// mustMakeWhole puts o into the ring and makes its whole file.
func mustMakeWhole(t *testing.T, c *Cache, o testObject) {
	t.Helper()
	o.putAll(c, 8)
	ok, err := c.MakeWholeFile(context.Background(), o.obj)
	if err != nil || !ok {
		t.Fatalf("MakeWholeFile(%s) = %v, %v; want true", o.obj.Key, ok, err)
	}
}

// mustReadWhole reads o's whole file through OpenWholeFile and fails
// unless it holds exactly o's bytes.
func mustReadWhole(t *testing.T, c *Cache, o testObject) {
	t.Helper()
	f, ok := c.OpenWholeFile(o.obj)
	if !ok {
		t.Fatalf("%s: no whole-shard file", o.obj.Key)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, o.data) {
		t.Fatalf("%s: whole-shard file holds %d bytes (%v), not the shard's %d", o.obj.Key, len(got), err, len(o.data))
	}
}

func wholeEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(wholeDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != journalName {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestWholeFileSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	o := newTestObject("whole.tar", 5*testBlock+123)
	mustMakeWhole(t, c, o)
	mustReadWhole(t, c, o)
	c.Close()

	c = openCache(t, cfg)
	if !c.HasWholeFile(o.obj) {
		t.Fatal("the whole-shard file is not held after a restart")
	}
	mustReadWhole(t, c, o)
	other := o.obj
	other.ETag = `"changed"`
	if _, ok := c.OpenWholeFile(other); ok {
		t.Fatal("a whole-shard file was opened for another ETag of its key")
	}
}

// A shard with a block missing from the ring is not made whole, and
// leaves nothing behind.
func TestWholeFileNeedsEveryBlock(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, wholeConfig(dir, 64))
	o := newTestObject("gap.tar", 4*testBlock)
	putRange(c, o.obj, 0, o.data[:testBlock])
	putRange(c, o.obj, 2*testBlock, o.data[2*testBlock:])
	if ok, err := c.MakeWholeFile(context.Background(), o.obj); ok || err != nil {
		t.Fatalf("MakeWholeFile with block 1 missing = %v, %v; want false, nil", ok, err)
	}
	if names := wholeEntries(t, dir); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	if c.HasWholeFile(o.obj) {
		t.Fatal("held without its blocks")
	}
}

// Files are evicted least recently opened first, the ring and the files
// stay within Size, and a descriptor opened before its file was evicted
// keeps reading the file's bytes.
func TestWholeFileEvictionKeepsOpenDescriptors(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	quota := c.Stats().WholeQuota
	size := quota / 3 / testBlock * testBlock // three fit, a fourth does not
	a, b, d, e := newTestObject("a.tar", size), newTestObject("b.tar", size), newTestObject("d.tar", size), newTestObject("e.tar", size)
	mustMakeWhole(t, c, a)
	mustMakeWhole(t, c, b)
	mustMakeWhole(t, c, d)
	open, ok := c.OpenWholeFile(a.obj) // a is now the most recently opened
	if !ok {
		t.Fatal("a is not held")
	}
	defer open.Close()
	mustMakeWhole(t, c, e)
	if c.HasWholeFile(b.obj) || !c.HasWholeFile(a.obj) || !c.HasWholeFile(d.obj) || !c.HasWholeFile(e.obj) {
		t.Fatalf("after a fourth file: held a=%v b=%v d=%v e=%v; want b, the least recently opened, evicted",
			c.HasWholeFile(a.obj), c.HasWholeFile(b.obj), c.HasWholeFile(d.obj), c.HasWholeFile(e.obj))
	}
	if st := c.Stats(); st.WholeBytes > quota || st.WholeEvictions != 1 {
		t.Fatalf("whole files: %d bytes (quota %d), %d evictions; want within the quota, 1", st.WholeBytes, quota, st.WholeEvictions)
	}
	if got, _ := dirBytes(t, dir); got > cfg.Size {
		t.Fatalf("cache dir holds %d bytes, over the cache size %d", got, cfg.Size)
	}

	// Evict a while its descriptor is open: it keeps reading a's bytes.
	mustMakeWhole(t, c, newTestObject("f.tar", size))
	mustMakeWhole(t, c, newTestObject("g.tar", size))
	if c.HasWholeFile(a.obj) {
		t.Fatal("a was not evicted")
	}
	if _, err := os.Stat(filepath.Join(wholeDir(dir), wholeName(cfg.version(a.obj)))); !os.IsNotExist(err) {
		t.Fatalf("a's file is still in the dir: %v", err)
	}
	got, err := io.ReadAll(io.NewSectionReader(open, 0, size+1))
	if err != nil || !bytes.Equal(got, a.data) {
		t.Fatalf("the descriptor opened before eviction read %d bytes (%v), want a's %d", len(got), err, size)
	}
}

// Open uses a file only when the journal vouches for it with its size:
// what a crash (or a hand) left otherwise is deleted, never served.
func TestUnvouchedWholeFilesAreDropped(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	kept, short, tmp := newTestObject("kept.tar", 3*testBlock), newTestObject("short.tar", 3*testBlock), newTestObject("tmp.tar", 3*testBlock)
	mustMakeWhole(t, c, kept)
	mustMakeWhole(t, c, short)
	mustMakeWhole(t, c, tmp)
	c.Close()
	wdir := wholeDir(dir)
	path := func(o testObject) string {
		return filepath.Join(wdir, wholeName(cfg.version(o.obj)))
	}
	// A file cut short after its rename (a disk that lost its tail).
	if err := os.Truncate(path(short), 2*testBlock); err != nil {
		t.Fatal(err)
	}
	// Vouched for, but killed before its rename: only NAME.tmp exists.
	if err := os.Rename(path(tmp), path(tmp)+tmpSuffix); err != nil {
		t.Fatal(err)
	}
	// A file with a name of ours and no record.
	stray := newTestObject("stray.tar", 2*testBlock)
	if err := os.WriteFile(path(stray), stray.data, 0o600); err != nil {
		t.Fatal(err)
	}

	c = openCache(t, cfg)
	mustReadWhole(t, c, kept)
	for _, o := range []testObject{short, tmp, stray} {
		if f, ok := c.OpenWholeFile(o.obj); ok {
			f.Close()
			t.Errorf("%s: an unvouched whole-shard file was opened", o.obj.Key)
		}
	}
	if names := wholeEntries(t, dir); len(names) != 1 || names[0] != filepath.Base(path(kept)) {
		t.Fatalf("shards dir holds %v; want only kept.tar's file", names)
	}
}

// A bit flipped in a complete file is found by VerifyDir, which deletes
// the file; the shard is then read from the ring, and can be made whole
// again from it.
func TestVerifyDropsAFlippedWholeFile(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	good, flipped := newTestObject("good.tar", 4*testBlock), newTestObject("flipped.tar", 4*testBlock+77)
	mustMakeWhole(t, c, good)
	mustMakeWhole(t, c, flipped)
	c.Close()
	path := filepath.Join(wholeDir(dir), wholeName(cfg.version(flipped.obj)))
	patchFile(t, path, 3*testBlock+5, []byte{flipped.data[3*testBlock+5] ^ 0x10})

	rep, err := VerifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.WholeChecked != 2 || rep.WholeGood != 1 || len(rep.BadWhole) != 1 || rep.BadWhole[0].Key != flipped.obj.Key ||
		!strings.Contains(rep.BadWhole[0].Reason, "CRC32C") {
		t.Fatalf("verify: %d checked, %d good, bad %+v; want flipped.tar bad by its CRC32C", rep.WholeChecked, rep.WholeGood, rep.BadWhole)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the bad file was not dropped: %v", err)
	}

	c = openCache(t, cfg)
	if c.HasWholeFile(flipped.obj) {
		t.Fatal("the dropped file is held again after a restart")
	}
	mustReadWhole(t, c, good)
	mustRead(t, c, flipped, 0, flipped.obj.Size)
	mustMakeWhole(t, c, flipped)
	mustReadWhole(t, c, flipped)
}
