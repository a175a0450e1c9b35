package wholefile

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

	"github.com/shardfs/shardfs/cache/internal/aligned"
	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

// unit is the size tests build shards from; testQuota holds 64 of them.
const (
	unit      = 16 << 10
	testQuota = 64 * unit
)

func TestWholeFileSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	o := newTestShard("whole.tar", 5*unit+123)
	mustMake(t, w, o)
	mustReadWhole(t, w, o)
	w.Close()

	w = openTier(t, dir, testQuota)
	if !w.Has(o.s) {
		t.Fatal("the whole-shard file is not held after a restart")
	}
	mustReadWhole(t, w, o)
	other := o.s
	other.ETag = `"changed"`
	other.ID = shardID(other.Key, other.ETag)
	if _, ok := w.OpenFile(other); ok {
		t.Fatal("a whole-shard file was opened for another version of its key")
	}
	short := o.s
	short.Size--
	if _, ok := w.OpenFile(short); ok {
		t.Fatal("a whole-shard file was opened for a shard of another size")
	}
}

// A shard whose bytes cannot all be read is not made whole, and leaves
// nothing behind; nor is one larger than the quota.
func TestWholeFileNeedsEveryByte(t *testing.T) {
	dir := t.TempDir()
	quota := int64(2 * copyChunk)
	w := openTier(t, dir, quota)
	o := newTestShard("gap.tar", copyChunk+unit) // two chunks: the first is written, the second is missing
	gap := func(p []byte, off int64) bool { return off == 0 && o.read(p, off) }
	if ok, err := w.Make(context.Background(), o.s, gap); ok || err != nil {
		t.Fatalf("Make with its second chunk missing = %v, %v; want false, nil", ok, err)
	}
	big := newTestShard("big.tar", quota+1)
	if ok, err := w.Make(context.Background(), big.s, big.read); ok || err != nil {
		t.Fatalf("Make of a shard over the quota = %v, %v; want false, nil", ok, err)
	}
	if names := wholeEntries(t, dir); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	if w.Has(o.s) || w.Has(big.s) {
		t.Fatal("held without its bytes")
	}
	if st := w.Stats(); st.Files != 0 || st.Bytes != 0 || st.Made != 0 {
		t.Fatalf("stats %+v after nothing was made", st)
	}
	// The failed copy gave its room back: with its bytes, the shard is made.
	mustMake(t, w, o)
	mustReadWhole(t, w, o)
}

// Files are evicted least recently opened first, within the quota, and a
// descriptor opened before its file was evicted keeps reading the file's
// bytes.
func TestWholeFileEvictionKeepsOpenDescriptors(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	size := int64(testQuota / 3) // three fit, a fourth does not
	a, b, d, e := newTestShard("a.tar", size), newTestShard("b.tar", size), newTestShard("d.tar", size), newTestShard("e.tar", size)
	mustMake(t, w, a)
	mustMake(t, w, b)
	mustMake(t, w, d)
	open, ok := w.OpenFile(a.s) // a is now the most recently opened
	if !ok {
		t.Fatal("a is not held")
	}
	defer open.Close()
	mustMake(t, w, e)
	if w.Has(b.s) || !w.Has(a.s) || !w.Has(d.s) || !w.Has(e.s) {
		t.Fatalf("after a fourth file: held a=%v b=%v d=%v e=%v; want b, the least recently opened, evicted",
			w.Has(a.s), w.Has(b.s), w.Has(d.s), w.Has(e.s))
	}
	if st := w.Stats(); st.Bytes > testQuota || st.Evictions != 1 || st.Made != 4 {
		t.Fatalf("whole files: %d bytes (quota %d), %d evictions, %d made; want within the quota, 1, 4", st.Bytes, testQuota, st.Evictions, st.Made)
	}

	// Evict a while its descriptor is open: it keeps reading a's bytes.
	mustMake(t, w, newTestShard("f.tar", size))
	mustMake(t, w, newTestShard("g.tar", size))
	if w.Has(a.s) {
		t.Fatal("a was not evicted")
	}
	if _, err := os.Stat(pathOf(dir, a)); !os.IsNotExist(err) {
		t.Fatalf("a's file is still in the dir: %v", err)
	}
	got, err := io.ReadAll(io.NewSectionReader(open, 0, size+1))
	if err != nil || !bytes.Equal(got, a.data) {
		t.Fatalf("the descriptor opened before eviction read %d bytes (%v), want a's %d", len(got), err, size)
	}

	// A smaller quota at the next open evicts the oldest at once.
	w.Close()
	w = openTier(t, dir, size)
	if st := w.Stats(); st.Files != 1 || st.Bytes != size {
		t.Fatalf("reopened with room for one file: %d files, %d bytes", st.Files, st.Bytes)
	}
}

// Open uses a file only when the journal vouches for it with its size:
// what a crash (or a hand) left otherwise is deleted, never served.
func TestUnvouchedWholeFilesAreDropped(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	kept, short, tmp := newTestShard("kept.tar", 3*unit), newTestShard("short.tar", 3*unit), newTestShard("tmp.tar", 3*unit)
	mustMake(t, w, kept)
	mustMake(t, w, short)
	mustMake(t, w, tmp)
	w.Close()
	// A file cut short after its rename (a disk that lost its tail).
	if err := os.Truncate(pathOf(dir, short), 2*unit); err != nil {
		t.Fatal(err)
	}
	// Vouched for, but killed before its rename: only NAME.tmp exists.
	if err := os.Rename(pathOf(dir, tmp), pathOf(dir, tmp)+tmpSuffix); err != nil {
		t.Fatal(err)
	}
	// A file with a name of ours and no record.
	stray := newTestShard("stray.tar", 2*unit)
	if err := os.WriteFile(pathOf(dir, stray), stray.data, 0o600); err != nil {
		t.Fatal(err)
	}

	w = openTier(t, dir, testQuota)
	mustReadWhole(t, w, kept)
	for _, o := range []testShard{short, tmp, stray} {
		mustNotOpen(t, w, o, "unvouched")
	}
	if names := wholeEntries(t, dir); len(names) != 1 || names[0] != Name(kept.s.ID) {
		t.Fatalf("shards dir holds %v; want only kept.tar's file", names)
	}
	if files, bytes := Inspect(dir); files != 1 || bytes != kept.s.Size {
		t.Fatalf("Inspect: %d files of %d bytes, want kept.tar's alone", files, bytes)
	}
}

// Verify checks every file against its record and deletes those that
// differ or have none.
func TestVerifyDropsAFlippedWholeFile(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	good, flipped := newTestShard("good.tar", 4*unit), newTestShard("flipped.tar", 4*unit+77)
	mustMake(t, w, good)
	mustMake(t, w, flipped)
	w.Close()
	cachetest.PatchFile(t, pathOf(dir, flipped), 3*unit+5, []byte{flipped.data[3*unit+5] ^ 0x10})
	stray := newTestShard("stray.tar", unit)
	if err := os.WriteFile(pathOf(dir, stray), stray.data, 0o600); err != nil {
		t.Fatal(err)
	}

	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != 2 || rep.Good != 1 || len(rep.Bad) != 2 {
		t.Fatalf("verify: %d checked, %d good, bad %+v; want flipped.tar and the stray bad", rep.Checked, rep.Good, rep.Bad)
	}
	for _, b := range rep.Bad {
		switch b.File {
		case pathOf(dir, flipped):
			if b.Key != flipped.s.Key || !strings.Contains(b.Reason, "CRC32C") {
				t.Errorf("flipped.tar: %+v, want its key and its CRC32C", b)
			}
		case pathOf(dir, stray):
			if b.Key != "" || !strings.Contains(b.Reason, "no journal record") {
				t.Errorf("stray: %+v, want no key and no record", b)
			}
		default:
			t.Errorf("reported bad: %+v", b)
		}
		if _, err := os.Stat(b.File); !os.IsNotExist(err) {
			t.Errorf("the bad file %s was not dropped: %v", b.File, err)
		}
	}
	if rep, err := Verify(t.TempDir()); err != nil || rep.Checked != 0 || len(rep.Bad) != 0 {
		t.Fatalf("Verify of a dir without whole files: %+v, %v", rep, err)
	}
}

// A byte flipped in a whole-shard file between two lives of the tier
// (bit rot, or a hand): the first open of the next life reads the file,
// finds its CRC32C wrong, and refuses it; the file is deleted, its journal
// record removed, the drop counted and logged once. The good file is
// checked once, then handed out without a second read.
func TestFirstOpenDropsARottenWholeFile(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	good, rotten := newTestShard("good.tar", 4*unit), newTestShard("rotten.tar", 4*unit+77)
	mustMake(t, w, good)
	mustMake(t, w, rotten)
	w.Close()
	cachetest.PatchFile(t, pathOf(dir, rotten), 2*unit+9, []byte{rotten.data[2*unit+9] ^ 0x01})

	var logs cachetest.LogRecorder
	w = openTierLogged(t, dir, testQuota, logs.Logger())
	if !w.Has(rotten.s) {
		t.Fatal("the rotten file is not held at open: its size still matches, only a read of it can tell")
	}
	mustNotOpen(t, w, rotten, "a byte flipped")
	wantChecks(t, w, 1, 1, "after the rotten file's open")
	if _, err := os.Stat(pathOf(dir, rotten)); !os.IsNotExist(err) {
		t.Fatalf("the rotten file is still in the dir: %v", err)
	}
	if w.Has(rotten.s) {
		t.Fatal("the rotten file is still held")
	}
	recs, err := readJournal(filepath.Join(dir, DirName, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[Name(rotten.s.ID)]; ok || len(recs) != 1 {
		t.Fatalf("journal vouches for %d files, the rotten one %v; want only the good one", len(recs), ok)
	}
	if n := strings.Count(logs.String(), "fails its check"); n != 1 || !strings.Contains(logs.String(), "CRC32C") {
		t.Fatalf("the drop was logged %d times, want once, naming the CRC32C:\n%s", n, logs.String())
	}
	mustNotOpen(t, w, rotten, "after the drop")

	mustReadWhole(t, w, good)
	mustReadWhole(t, w, good)
	wantChecks(t, w, 2, 1, "the good file opened twice")
	if st := w.Stats(); st.Opens != 2 {
		t.Fatalf("%d descriptors handed out, want 2", st.Opens)
	}

	w.Close()
	w = openTier(t, dir, testQuota)
	if w.Has(rotten.s) {
		t.Fatal("the dropped file is held again after a restart")
	}
	mustReadWhole(t, w, good)
	wantChecks(t, w, 1, 0, "the good file's first open after a restart")
	mustMake(t, w, rotten)
	mustReadWhole(t, w, rotten)
}

// A file made in this process and marked checked is handed out at its
// first open without being read again; one not marked is checked.
func TestMarkCheckedSkipsTheFirstCheck(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	marked, unmarked := newTestShard("marked.tar", 3*unit), newTestShard("unmarked.tar", 3*unit)
	mustMake(t, w, marked)
	w.MarkChecked(marked.s)
	mustMake(t, w, unmarked)
	mustReadWhole(t, w, marked)
	wantChecks(t, w, 0, 0, "a marked file's first open")
	mustReadWhole(t, w, unmarked)
	wantChecks(t, w, 1, 0, "an unmarked file's first open")
	w.MarkChecked(newTestShard("absent.tar", unit).s) // not held: nothing to mark
}

// A file checked once is checked again at its next open after its
// mtime, ctime or size changed: a changed mtime alone (bytes intact)
// passes; a byte flipped with the mtime put back (only the ctime tells)
// fails, as does a byte appended.
func TestWholeFileCheckedAgainAfterAChange(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	a, b := newTestShard("a.tar", 3*unit+5), newTestShard("b.tar", 3*unit)
	mustMake(t, w, a)
	mustMake(t, w, b)
	mustReadWhole(t, w, a)
	mustReadWhole(t, w, b)
	mustReadWhole(t, w, a)
	wantChecks(t, w, 2, 0, "two files, three opens")

	// Another mtime, the bytes unchanged: checked again, handed out.
	if err := os.Chtimes(pathOf(dir, a), time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	mustReadWhole(t, w, a)
	wantChecks(t, w, 3, 0, "after a's mtime changed")
	mustReadWhole(t, w, a)
	wantChecks(t, w, 3, 0, "a opened again, unchanged")

	// A byte flipped, the mtime put back as it was: the ctime changed.
	fi, err := os.Stat(pathOf(dir, a))
	if err != nil {
		t.Fatal(err)
	}
	cachetest.PatchFile(t, pathOf(dir, a), 7, []byte{a.data[7] ^ 0x80})
	// Put the mtime back until the ctime differs from the one the check
	// remembered: a filesystem's clock may give a change made within one
	// of its ticks the same ctime (only a hand that puts the mtime back
	// to the nanosecond hides a write that way).
	w.mu.Lock()
	f := w.files[Name(a.s.ID)]
	w.mu.Unlock()
	f.check.Lock()
	checked := f.checked
	f.check.Unlock()
	for {
		if err := os.Chtimes(pathOf(dir, a), fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(pathOf(dir, a), &st); err != nil {
			t.Fatal(err)
		}
		if st.Ctim.Nano() != checked.ctime {
			break
		}
	}
	mustNotOpen(t, w, a, "a byte flipped, mtime restored")
	wantChecks(t, w, 4, 1, "after a's byte flipped")

	// A byte appended: another size.
	fd, err := os.OpenFile(pathOf(dir, b), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fd.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	fd.Close()
	mustNotOpen(t, w, b, "a byte appended")
	wantChecks(t, w, 5, 2, "after b grew")
	if names := wholeEntries(t, dir); len(names) != 0 {
		t.Fatalf("the changed files are still in the dir: %v", names)
	}
}

// Concurrent first opens of one file make one check between them, and
// each gets a descriptor that reads the file from its start.
func TestConcurrentFirstOpensCheckOnce(t *testing.T) {
	dir := t.TempDir()
	w := openTier(t, dir, testQuota)
	o := newTestShard("o.tar", 8*unit)
	mustMake(t, w, o)
	var wg sync.WaitGroup
	errs := make([]string, 8)
	for i := range errs {
		wg.Go(func() {
			f, ok := w.OpenFile(o.s)
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
	wantChecks(t, w, 1, 0, "8 concurrent opens")
}

// A build takes every block from Write, the shard's short last block
// without its padding too (a part's buffer ends where the shard does):
// Finish then reads nothing back, and the file holds the shard's bytes.
func TestBuildTakesTheShortLastBlockUnpadded(t *testing.T) {
	w := openTier(t, t.TempDir(), testQuota)
	o := newTestShard("tail.tar", 3*unit+123)
	b, ok, err := w.Begin(o.s, unit)
	if err != nil || !ok {
		t.Fatalf("Begin = %v, %v", ok, err)
	}
	for i := int64(0); i*unit < o.s.Size; i++ {
		n := min(unit, o.s.Size-i*unit)
		p := aligned.Buffer(int(unit))[:n] // the last: 123 bytes, no room for padding past them
		copy(p, o.data[i*unit:])
		if !b.Write(i, p, checksum(p)) {
			t.Fatalf("Write of block %d (%d bytes) refused", i, n)
		}
	}
	readBack := func(p []byte, off int64) bool {
		t.Errorf("Finish read back %d bytes at %d: a block Write took was not kept", len(p), off)
		return o.read(p, off)
	}
	if ok, err := b.Finish(context.Background(), readBack); !ok || err != nil {
		t.Fatalf("Finish = %v, %v; want true", ok, err)
	}
	mustReadWhole(t, w, o)
}
