package cache

// Whole-shard files: a tier beside the ring that holds complete shards as
// plain files, one per object version, in CACHE_DIR/shards. A file's
// offsets are the shard's, so the kernel can read it in place of the
// mount (FUSE passthrough) and a GPU client can read it directly. The ring's
// scattered blocks cannot give either.
//
// A file is made only from a complete set of blocks that pass their CRC in
// the ring (MakeWholeFile), written to a temporary file with a CRC32C over
// the whole file, synced, vouched for by a synced journal record
// (shardfile_journal.go), then renamed to NAME and the directory synced
// (package atomicfile, a Durable write). Open deletes what a killed write
// left (atomicfile's temporary files, NAME.tmp of earlier releases) and
// every file without a record of its size, so a file torn by a crash is
// never used. `shardfs cache verify` recomputes every file's CRC32C and
// deletes those that differ (VerifyDir).
//
// A file is checked against its record's CRC32C (checkWhole, the check
// cache verify makes) before this process first hands out a descriptor of
// it, and again whenever its size, mtime, ctime or inode differs from
// what was checked: its bytes may rot on the disk between mounts, or be
// written by a hand, and a passed-through read is served by the kernel
// with nothing of ours between. A file that fails is dropped (unlinked,
// its record removed by a tombstone record), counted and logged, and its
// shard is read through the daemon: the ring's checked blocks or the
// store. The check runs outside wholeFiles.mu, so opens of other files do
// not wait for it; concurrent opens of one file wait for its one check.
//
// Files share the cache's size bound: Config.WholeShardPercent of it, the
// ring taking the rest. When a new file needs room the least recently
// opened go first. Eviction only unlinks: a descriptor already open (a
// passed-through handle, whose backing file the kernel holds) keeps
// reading the same bytes until it is closed.
//
// Lock order: Cache.life → wholeFile.check → wholeFiles.mu. wholeFiles.mu
// covers the table, the journal's appends, renames and unlinks (metadata
// operations, one per file made or dropped), never the copy of a file's
// bytes nor their check. wholeFile.check is held by an open of that file
// from its open(2) to its hand-out, the check included.

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/store"
)

// wholeCopyChunk is how much of a shard MakeWholeFile reads from the ring
// at a time (its blocks are read concurrently).
const wholeCopyChunk = 8 << 20

func newSum() hash.Hash32 { return crc32.New(castagnoli) }

// wholeFile is one complete file of the tier.
type wholeFile struct {
	rec     wholeRecord
	lastUse int64 // unix nanoseconds of its last open (its mtime after a restart); under wholeFiles.mu

	// check is held by an open of the file until it hands the descriptor
	// out or refuses it; checked is under it.
	check sync.Mutex
	// checked is the file's stamp when it last passed its check, or when
	// an open made since touched it (marking its use changes its mtime
	// and ctime); the zero stamp until its first check in this process.
	checked fileStamp
}

// fileStamp is what a file's check is remembered by: a change of any of
// these calls for a new check.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // unix nanoseconds
}

// stampOf is the stamp of an open file.
func stampOf(f *os.File) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileStamp{}, err
	}
	return fileStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, nil
}

// wholeFiles is the tier's table of files and its journal.
type wholeFiles struct {
	dir   string
	quota int64
	stats *counters
	log   *slog.Logger

	mu       sync.Mutex
	files    map[string]*wholeFile // by name
	making   map[string]bool       // names being written
	reserved int64                 // bytes of files being written
	used     int64                 // bytes of files held
	journal  *os.File              // append-only
}

// openWholeFiles opens (creating) the tier in cacheDir, dropping what the
// journal does not vouch for and then, oldest first, what exceeds quota.
func openWholeFiles(cacheDir string, quota int64, stats *counters, log *slog.Logger) (*wholeFiles, error) {
	dir := wholeDir(cacheDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("whole-shard dir: %w", err)
	}
	if err := cachedir.CheckDir(dir); err != nil {
		return nil, err
	}
	jpath := filepath.Join(dir, journalName)
	recs, err := readJournal(jpath)
	if err != nil {
		return nil, err
	}
	kept, lastUse, dropped, err := checkWholeFiles(dir, recs)
	if err != nil {
		return nil, err
	}
	if err := writeJournal(jpath, kept); err != nil {
		return nil, err
	}
	j, err := cachedir.OpenPrivate(jpath, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return nil, fmt.Errorf("whole-shard journal: %w", err)
	}
	w := &wholeFiles{dir: dir, quota: quota, stats: stats, log: log, files: map[string]*wholeFile{}, making: map[string]bool{}, journal: j}
	for name, r := range kept {
		w.files[name] = &wholeFile{rec: r, lastUse: lastUse[name]}
		w.used += r.Size
	}
	w.mu.Lock()
	w.evictLocked(0)
	w.mu.Unlock()
	log.Info("whole-shard files opened", "dir", dir, "files", len(w.files), "bytes", w.used, "quota", quota, "dropped", dropped)
	return w, nil
}

func (w *wholeFiles) path(name string) string { return filepath.Join(w.dir, name) }

// evictLocked unlinks the least recently opened files until need more
// bytes fit in the quota beside those held and being written. It reports
// whether they fit.
func (w *wholeFiles) evictLocked(need int64) bool {
	if w.used+w.reserved+need <= w.quota {
		return true
	}
	byAge := make([]string, 0, len(w.files))
	for name := range w.files {
		byAge = append(byAge, name)
	}
	sort.Slice(byAge, func(i, j int) bool { return w.files[byAge[i]].lastUse < w.files[byAge[j]].lastUse })
	for _, name := range byAge {
		if w.used+w.reserved+need <= w.quota {
			break
		}
		w.dropLocked(name)
		w.stats.wholeEvictions.Add(1)
	}
	return w.used+w.reserved+need <= w.quota
}

// dropLocked forgets and unlinks a held file. Its journal record stays
// until the next open, which finds no file for it.
func (w *wholeFiles) dropLocked(name string) {
	f, ok := w.files[name]
	if !ok {
		return
	}
	delete(w.files, name)
	w.used -= f.rec.Size
	if err := os.Remove(w.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Warn("whole-shard file not removed", "file", w.path(name), "err", err)
	}
}

// reserve claims room for a new file of obj, or reports why not.
func (w *wholeFiles) reserve(name string, size int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, held := w.files[name]; held || w.making[name] || size > w.quota {
		return false
	}
	if !w.evictLocked(size) {
		return false
	}
	w.making[name] = true
	w.reserved += size
	return true
}

func (w *wholeFiles) unreserve(name string, size int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.making, name)
	w.reserved -= size
}

// commit vouches for f, a complete and synced file of r, and gives it its
// name, durably: a power loss after commit keeps the file and its record.
func (w *wholeFiles) commit(r wholeRecord, f *atomicfile.File) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.making, r.Name)
	w.reserved -= r.Size
	if err := appendRecord(w.journal, r); err != nil {
		return fmt.Errorf("whole-shard journal: %w", err)
	}
	if err := f.Commit(atomicfile.Durable); err != nil {
		return err
	}
	w.files[r.Name] = &wholeFile{rec: r, lastUse: time.Now().UnixNano()}
	w.used += r.Size
	w.stats.wholeMade.Add(1)
	return nil
}

// open returns a read-only descriptor of the held file name of size
// bytes, checked against its record unless it was checked before and has
// not changed since, and marks it used. It reports false when the tier
// does not hold the file, when the file fails its check (it is then
// dropped) and when it changes or is dropped while being checked (the
// next open checks it again).
func (w *wholeFiles) open(name string, size int64) (*os.File, bool) {
	w.mu.Lock()
	f, ok := w.files[name]
	w.mu.Unlock()
	if !ok || f.rec.Size != size {
		return nil, false
	}
	f.check.Lock()
	defer f.check.Unlock()
	file, err := cachedir.OpenPrivate(w.path(name), os.O_RDONLY)
	if err != nil {
		w.log.Warn("whole-shard file unreadable; dropped", "file", w.path(name), "err", err)
		w.drop(f, false)
		return nil, false
	}
	before, err := stampOf(file)
	if err == nil && before != f.checked {
		w.stats.wholeChecks.Add(1)
		if reason := checkWhole(file, f.rec); reason != "" {
			file.Close()
			w.stats.wholeCheckFails.Add(1)
			w.log.Warn("whole-shard file fails its check; dropped, its shard is read through the daemon",
				"file", w.path(name), "key", f.rec.Key, "reason", reason)
			w.drop(f, true)
			return nil, false
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	after, serr := stampOf(file)
	if err != nil || serr != nil || after != before || w.files[name] != f {
		file.Close()
		return nil, false
	}
	now := time.Now()
	f.lastUse = now.UnixNano()
	_ = os.Chtimes(w.path(name), now, now) // the order of use survives a restart
	// The touch changed the file's mtime and ctime: what is remembered
	// is the stamp it left. A write between the stat above and the touch
	// would go unseen, as would one just after this open returns: the
	// check vouches for the bytes as they were when handed out.
	f.checked, _ = stampOf(file)
	return file, true
}

// markChecked remembers the held file name as checked in its present
// state: its bytes were summed as this process made it.
func (w *wholeFiles) markChecked(name string) {
	w.mu.Lock()
	f := w.files[name]
	w.mu.Unlock()
	if f == nil {
		return
	}
	file, err := cachedir.OpenPrivate(w.path(name), os.O_RDONLY)
	if err != nil {
		return
	}
	defer file.Close()
	st, err := stampOf(file)
	if err != nil {
		return
	}
	f.check.Lock()
	f.checked = st
	f.check.Unlock()
}

// drop forgets and unlinks f, unless the table no longer holds it (it
// was evicted or dropped meanwhile). With forget, its journal record is
// removed too (a tombstone record), so the journal no longer vouches for
// the name.
func (w *wholeFiles) drop(f *wholeFile, forget bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.files[f.rec.Name] != f {
		return
	}
	w.dropLocked(f.rec.Name)
	if !forget {
		return
	}
	if err := appendRecord(w.journal, wholeRecord{Name: f.rec.Name}); err != nil {
		// The file is gone; the next open drops the record that names it.
		w.log.Warn("whole-shard journal: record of a dropped file not removed", "file", w.path(f.rec.Name), "err", err)
	}
}

func (w *wholeFiles) has(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.files[name]
	return ok
}

func (w *wholeFiles) occupancy() (files, bytes int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(len(w.files)), w.used
}

func (w *wholeFiles) close() error { return w.journal.Close() }

// MakeWholeFile keeps obj as a whole-shard file, made from its blocks in
// the ring, each of which must pass its CRC check. It reports whether the
// file is held when it returns: false, with a nil error, when the tier is
// off, the shard does not fit its quota, another call is making it, or a
// block is not in the ring (the caller fetches it first).
func (c *Cache) MakeWholeFile(ctx context.Context, obj store.Object) (bool, error) {
	if c.whole == nil || obj.Size <= 0 || !c.enter() {
		return false, nil
	}
	defer c.leave()
	name := wholeName(c.version(obj))
	if c.whole.has(name) {
		return true, nil
	}
	if !c.whole.reserve(name, obj.Size) {
		return false, nil
	}
	f, err := atomicfile.Create(c.whole.path(name))
	if err != nil {
		c.whole.unreserve(name, obj.Size)
		return false, fmt.Errorf("whole-shard file: %w", err)
	}
	defer f.Discard() // a no-op once committed
	sum, complete, err := c.copyWhole(ctx, obj, f)
	if err != nil || !complete {
		c.whole.unreserve(name, obj.Size)
		return false, err
	}
	r := wholeRecord{Name: name, Key: c.cfg.key(obj), ETag: obj.ETag, Size: obj.Size, Sum: sum}
	if err := c.whole.commit(r, f); err != nil {
		return false, fmt.Errorf("whole-shard file of %s: %w", obj.Key, err)
	}
	return true, nil
}

// copyWhole writes obj's ring blocks to f and syncs it, returning the
// CRC32C of the bytes written; complete is false when a block was missing
// or failed its check.
func (c *Cache) copyWhole(ctx context.Context, obj store.Object, f *atomicfile.File) (sum uint32, complete bool, err error) {
	h := newSum()
	buf := make([]byte, min(wholeCopyChunk, obj.Size))
	for off := int64(0); off < obj.Size; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		p := buf[:min(int64(len(buf)), obj.Size-off)]
		if n, ok := c.readAt(obj, p, off, false); !ok || n != len(p) {
			return 0, false, nil
		}
		h.Write(p)
		if _, err := f.Write(p); err != nil {
			return 0, false, fmt.Errorf("whole-shard file: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, false, fmt.Errorf("whole-shard file: %w", err)
	}
	return h.Sum32(), true, nil
}

// OpenWholeFile returns a read-only descriptor of obj's whole-shard file
// when the tier holds the complete file of obj's version and it passes
// its check: the first open of a file in this process's life reads it
// whole and compares its CRC32C with the journal's record, as does the
// first open after the file changed (size, mtime, ctime or inode). A file
// that fails is dropped, counted (Stats.WholeCheckFails) and logged,
// and OpenWholeFile reports false: the caller reads the shard another way.
// The caller closes the descriptor. The file may be evicted while open;
// the descriptor keeps reading its bytes.
func (c *Cache) OpenWholeFile(obj store.Object) (*os.File, bool) {
	if c.whole == nil || !c.enter() {
		return nil, false
	}
	defer c.leave()
	f, ok := c.whole.open(wholeName(c.version(obj)), obj.Size)
	if ok {
		c.stats.wholeOpens.Add(1)
	}
	return f, ok
}

// HasWholeFile reports whether the tier holds obj's version whole.
func (c *Cache) HasWholeFile(obj store.Object) bool {
	if c.whole == nil || !c.enter() {
		return false
	}
	defer c.leave()
	return c.whole.has(wholeName(c.version(obj)))
}

// WholeFilesDir is the directory of the whole-shard files, "" when the
// tier is off. A passthrough probe opens a file there.
func (c *Cache) WholeFilesDir() string {
	if c.whole == nil {
		return ""
	}
	return c.whole.dir
}
