package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
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

// openLogged opens cfg with its log going to logs, and closes it when the
// test ends.
func openLogged(t *testing.T, cfg Config, logs *cachetest.LogRecorder) *Cache {
	t.Helper()
	cfg.BlockSize = testBlock
	c, err := Open(context.Background(), cfg, logs.Logger())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mustNotOpenWhole fails if OpenWholeFile hands out o's file.
func mustNotOpenWhole(t *testing.T, c *Cache, o testObject, why string) {
	t.Helper()
	if f, ok := c.OpenWholeFile(o.obj); ok {
		f.Close()
		t.Fatalf("%s: %s's whole-shard file was handed out", why, o.obj.Key)
	}
}

// wantChecks fails unless the cache made checks checks and dropped fails
// files by them.
func wantChecks(t *testing.T, c *Cache, checks, fails uint64, why string) {
	t.Helper()
	if st := c.Stats(); st.WholeChecks != checks || st.WholeCheckFails != fails {
		t.Fatalf("%s: %d checks, %d failed; want %d and %d", why, st.WholeChecks, st.WholeCheckFails, checks, fails)
	}
}

// A byte flipped in a whole-shard file between two lives of the cache
// (bit rot, or a hand): the first open of the next life reads the file,
// finds its CRC32C wrong, and refuses it; the file is deleted, its journal
// record removed, the drop counted and logged once. The shard is still
// read right from the ring, and the good file is checked once, then
// handed out without a second read.
func TestFirstOpenDropsARottenWholeFile(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	good, rotten := newTestObject("good.tar", 4*testBlock), newTestObject("rotten.tar", 4*testBlock+77)
	mustMakeWhole(t, c, good)
	mustMakeWhole(t, c, rotten)
	c.Close()
	path := filepath.Join(wholeDir(dir), wholeName(cfg.version(rotten.obj)))
	cachetest.PatchFile(t, path, 2*testBlock+9, []byte{rotten.data[2*testBlock+9] ^ 0x01})

	var logs cachetest.LogRecorder
	c = openLogged(t, cfg, &logs)
	if !c.HasWholeFile(rotten.obj) {
		t.Fatal("the rotten file is not held at open: its size still matches, only a read of it can tell")
	}
	mustNotOpenWhole(t, c, rotten, "a byte flipped")
	wantChecks(t, c, 1, 1, "after the rotten file's open")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the rotten file is still in the dir: %v", err)
	}
	if c.HasWholeFile(rotten.obj) {
		t.Fatal("the rotten file is still held")
	}
	recs, err := readJournal(filepath.Join(wholeDir(dir), journalName))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[wholeName(cfg.version(rotten.obj))]; ok || len(recs) != 1 {
		t.Fatalf("journal vouches for %d files, the rotten one %v; want only the good one", len(recs), ok)
	}
	if n := strings.Count(logs.String(), "fails its check"); n != 1 || !strings.Contains(logs.String(), "CRC32C") {
		t.Fatalf("the drop was logged %d times, want once, naming the CRC32C:\n%s", n, logs.String())
	}
	mustNotOpenWhole(t, c, rotten, "after the drop")
	mustRead(t, c, rotten, 0, rotten.obj.Size) // the ring's blocks are still good

	mustReadWhole(t, c, good)
	mustReadWhole(t, c, good)
	wantChecks(t, c, 2, 1, "the good file opened twice")

	c.Close()
	c = openCache(t, cfg)
	if c.HasWholeFile(rotten.obj) {
		t.Fatal("the dropped file is held again after a restart")
	}
	mustReadWhole(t, c, good)
	wantChecks(t, c, 1, 0, "the good file's first open after a restart")
}

// A file checked once is checked again at its next open after its
// mtime, ctime or size changed: a changed mtime alone (bytes intact)
// passes; a byte flipped with the mtime put back (only the ctime tells)
// fails, as does a byte appended.
func TestWholeFileCheckedAgainAfterAChange(t *testing.T) {
	dir := t.TempDir()
	cfg := wholeConfig(dir, 64)
	c := openCache(t, cfg)
	a, b := newTestObject("a.tar", 3*testBlock+5), newTestObject("b.tar", 3*testBlock)
	mustMakeWhole(t, c, a)
	mustMakeWhole(t, c, b)
	pathOf := func(o testObject) string { return filepath.Join(wholeDir(dir), wholeName(cfg.version(o.obj))) }
	mustReadWhole(t, c, a)
	mustReadWhole(t, c, b)
	mustReadWhole(t, c, a)
	wantChecks(t, c, 2, 0, "two files, three opens")

	// Another mtime, the bytes unchanged: checked again, handed out.
	if err := os.Chtimes(pathOf(a), time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	mustReadWhole(t, c, a)
	wantChecks(t, c, 3, 0, "after a's mtime changed")
	mustReadWhole(t, c, a)
	wantChecks(t, c, 3, 0, "a opened again, unchanged")

	// A byte flipped, the mtime put back as it was: the ctime changed.
	fi, err := os.Stat(pathOf(a))
	if err != nil {
		t.Fatal(err)
	}
	cachetest.PatchFile(t, pathOf(a), 7, []byte{a.data[7] ^ 0x80})
	// Put the mtime back until the ctime differs from the one the check
	// remembered: a filesystem's clock may give a change made within one
	// of its ticks the same ctime (only a hand that puts the mtime back
	// to the nanosecond hides a write that way).
	checked := c.whole.files[wholeName(cfg.version(a.obj))].checked
	for {
		if err := os.Chtimes(pathOf(a), fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(pathOf(a), &st); err != nil {
			t.Fatal(err)
		}
		if st.Ctim.Nano() != checked.ctime {
			break
		}
	}
	mustNotOpenWhole(t, c, a, "a byte flipped, mtime restored")
	wantChecks(t, c, 4, 1, "after a's byte flipped")

	// A byte appended: another size.
	f, err := os.OpenFile(pathOf(b), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mustNotOpenWhole(t, c, b, "a byte appended")
	wantChecks(t, c, 5, 2, "after b grew")
	if names := wholeEntries(t, dir); len(names) != 0 {
		t.Fatalf("the changed files are still in the dir: %v", names)
	}
}

// Concurrent first opens of one file make one check between them, and
// each gets a descriptor that reads the file from its start.
func TestConcurrentFirstOpensCheckOnce(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, wholeConfig(dir, 64))
	o := newTestObject("o.tar", 8*testBlock)
	mustMakeWhole(t, c, o)
	var wg sync.WaitGroup
	errs := make([]string, 8)
	for i := range errs {
		wg.Go(func() {
			f, ok := c.OpenWholeFile(o.obj)
			if !ok {
				errs[i] = "not handed out"
				return
			}
			defer f.Close()
			if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, o.data) {
				errs[i] = fmt.Sprintf("read %d bytes (%v), not the shard's %d", len(got), err, len(o.data))
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("open %d: %s", i, e)
		}
	}
	wantChecks(t, c, 1, 0, "8 concurrent opens")
}
