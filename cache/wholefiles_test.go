package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
	"github.com/shardfs/shardfs/cache/wholefile"
)

// The whole-shard files as the cache uses them: made from the ring's
// checked blocks, named by the cache's version of a shard, within the
// cache's one size. What the tier does with a file (its journal, its
// checks, eviction, crashes) is tested in package wholefile.

// wholeConfig is a ring of slots blocks beside whole-shard files of about
// the same size (half of the cache each).
func wholeConfig(dir string, slots int64) Config { return wholeShareConfig(dir, slots, 50) }

// wholeShareConfig is a ring of slots blocks beside whole-shard files
// that take percent of the cache.
func wholeShareConfig(dir string, slots int64, percent int) Config {
	cfg := ringConfig(dir, slots)
	cfg.WholeShardPercent = percent
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
	cachetest.MustHold(t, f, ok, o.obj.Key, o.data)
}

// wholePath is the file of o's version in the cache dir of cfg.
func wholePath(cfg Config, o testObject) string {
	return filepath.Join(cfg.Dir, wholefile.DirName, wholefile.Name(cfg.version(o.obj)))
}

// wholeEntries lists the whole-shard files' dir, the journal left out.
func wholeEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, wholefile.DirName))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != wholefile.JournalName {
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
	if dir := c.WholeFilesDir(); dir != filepath.Dir(wholePath(cfg, o)) {
		t.Fatalf("WholeFilesDir %s, not the dir of the file", dir)
	}
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
	if st := c.Stats(); st.WholeFiles != 1 || st.WholeBytes != o.obj.Size || st.WholeOpens != 1 {
		t.Fatalf("stats after a restart and one open: %d files, %d bytes, %d opens", st.WholeFiles, st.WholeBytes, st.WholeOpens)
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

// The ring and the whole-shard files together stay within the cache's
// Size: files are evicted for room within their share.
func TestWholeFilesAndTheRingKeepWithinTheCacheSize(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	quota := c.Stats().WholeQuota
	size := quota / 3 / testBlock * testBlock // three fit, a fourth does not
	for _, key := range []string{"a.tar", "b.tar", "d.tar", "e.tar", "f.tar"} {
		mustMakeWhole(t, c, newTestObject(key, size))
	}
	if st := c.Stats(); st.WholeBytes > quota || st.WholeEvictions != 2 || st.WholeMade != 5 {
		t.Fatalf("whole files: %d bytes (quota %d), %d evictions, %d made; want within the quota, 2, 5", st.WholeBytes, quota, st.WholeEvictions, st.WholeMade)
	}
	if got, _ := dirBytes(t, dir); got > cfg.Size {
		t.Fatalf("cache dir holds %d bytes, over the cache size %d", got, cfg.Size)
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
	path := wholePath(cfg, flipped)
	cachetest.PatchFile(t, path, 3*testBlock+5, []byte{flipped.data[3*testBlock+5] ^ 0x10})

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

// A byte flipped in a whole-shard file between two lives of the cache:
// its first open refuses it, drops it and counts the drop; the shard is
// still read right from the ring, and made whole again from it.
func TestARottenWholeFileIsReadFromTheRingAndMadeAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	rotten := newTestObject("rotten.tar", 4*testBlock+77)
	mustMakeWhole(t, c, rotten)
	c.Close()
	cachetest.PatchFile(t, wholePath(cfg, rotten), 2*testBlock+9, []byte{rotten.data[2*testBlock+9] ^ 0x01})

	c = openCache(t, cfg)
	if f, ok := c.OpenWholeFile(rotten.obj); ok {
		f.Close()
		t.Fatal("a rotten whole-shard file was handed out")
	}
	if st := c.Stats(); st.WholeChecks != 1 || st.WholeCheckFails != 1 || c.HasWholeFile(rotten.obj) {
		t.Fatalf("after the rotten file's open: %d checks, %d failed, held %v; want 1, 1, dropped", st.WholeChecks, st.WholeCheckFails, c.HasWholeFile(rotten.obj))
	}
	mustRead(t, c, rotten, 0, rotten.obj.Size) // the ring's blocks are still good
	mustMakeWhole(t, c, rotten)
	mustReadWhole(t, c, rotten)
}
