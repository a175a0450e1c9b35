package wholefile

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
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/cache/internal/aligned"
)

// copyChunk is how much of a shard Make reads at a time (the caller's
// read may read the blocks of one chunk concurrently).
const copyChunk = 8 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

func newSum() hash.Hash32 { return crc32.New(castagnoli) }

// Shard names one object version the tier may hold as a file.
type Shard struct {
	ID   [16]byte // the version's identity where the cache names it; the file's name is its hex
	Key  string   // the object's key where the cache names it, for logs and reports
	ETag string
	Size int64
}

// ReadFunc fills p with the shard's bytes from off, every byte checked
// against a CRC it was stored with; false when a byte is missing or fails
// its check.
type ReadFunc func(p []byte, off int64) bool

// Stats is a snapshot of the tier's figures.
type Stats struct {
	Files      int64  // files held
	Bytes      int64  // their bytes
	Quota      int64  // bytes they may use
	Made       uint64 // files made
	Evictions  uint64 // files unlinked for room
	Opens      uint64 // descriptors handed out
	Checks     uint64 // files read and CRC-checked before a descriptor was handed out
	CheckFails uint64 // of Checks, files that failed and were dropped
}

// file is one complete file of the tier.
type file struct {
	rec     record
	lastUse int64 // unix nanoseconds of its last open (its mtime after a restart); under Tier.mu

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

// Tier is the table of whole-shard files of one cache dir and its
// journal. It is safe for concurrent use.
type Tier struct {
	dir   string
	quota int64
	log   *slog.Logger

	made, evictions, opens, checks, checkFails atomic.Uint64

	mu       sync.Mutex
	files    map[string]*file // by name
	making   map[string]bool  // names being written
	reserved int64            // bytes of files being written
	used     int64            // bytes of files held
	journal  *os.File         // append-only
}

// Open opens (creating) the tier in cacheDir, dropping what the journal
// does not vouch for and then, oldest first, what exceeds quota.
func Open(cacheDir string, quota int64, log *slog.Logger) (*Tier, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := wholeDir(cacheDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("whole-shard dir: %w", err)
	}
	if err := cachedir.CheckDir(dir); err != nil {
		return nil, err
	}
	jpath := filepath.Join(dir, JournalName)
	recs, err := readJournal(jpath)
	if err != nil {
		return nil, err
	}
	kept, lastUse, dropped, err := checkFiles(dir, recs)
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
	t := &Tier{dir: dir, quota: quota, log: log, files: map[string]*file{}, making: map[string]bool{}, journal: j}
	for name, r := range kept {
		t.files[name] = &file{rec: r, lastUse: lastUse[name]}
		t.used += r.Size
	}
	t.mu.Lock()
	t.evictLocked(0)
	t.mu.Unlock()
	log.Info("whole-shard files opened", "dir", dir, "files", len(t.files), "bytes", t.used, "quota", quota, "dropped", dropped)
	return t, nil
}

func (t *Tier) path(name string) string { return filepath.Join(t.dir, name) }

// Dir is the directory of the files. A passthrough probe opens a file
// there.
func (t *Tier) Dir() string { return t.dir }

// evictLocked unlinks the least recently opened files until need more
// bytes fit in the quota beside those held and being written. It reports
// whether they fit.
func (t *Tier) evictLocked(need int64) bool {
	if t.used+t.reserved+need <= t.quota {
		return true
	}
	byAge := make([]string, 0, len(t.files))
	for name := range t.files {
		byAge = append(byAge, name)
	}
	sort.Slice(byAge, func(i, j int) bool { return t.files[byAge[i]].lastUse < t.files[byAge[j]].lastUse })
	for _, name := range byAge {
		if t.used+t.reserved+need <= t.quota {
			break
		}
		t.dropLocked(name)
		t.evictions.Add(1)
	}
	return t.used+t.reserved+need <= t.quota
}

// dropLocked forgets and unlinks a held file. Its journal record stays
// until the next open, which finds no file for it.
func (t *Tier) dropLocked(name string) {
	f, ok := t.files[name]
	if !ok {
		return
	}
	delete(t.files, name)
	t.used -= f.rec.Size
	if err := os.Remove(t.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.log.Warn("whole-shard file not removed", "file", t.path(name), "err", err)
	}
}

// reserve claims room for a new file, or reports why not.
func (t *Tier) reserve(name string, size int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, held := t.files[name]; held || t.making[name] || size > t.quota {
		return false
	}
	if !t.evictLocked(size) {
		return false
	}
	t.making[name] = true
	t.reserved += size
	return true
}

func (t *Tier) unreserve(name string, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.making, name)
	t.reserved -= size
}

// commit vouches for f, a complete file of r, and gives it its name.
// Durable (Make: warm's files, which a node keeps for its runs): f is
// synced and a power loss after commit keeps the file and its record.
// Unsynced (a file written as its shard was read): nothing is synced, so
// the pass that wrote it waits for no flush; a crash may lose the file or
// its record, or leave a record of a file with bytes not on the disk,
// which the file's check at its first open in the next process's life
// finds (checkWhole), so the file is dropped, never handed out.
func (t *Tier) commit(r record, f *atomicfile.File, d atomicfile.Durability) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.making, r.Name)
	t.reserved -= r.Size
	if err := appendRecord(t.journal, r, d != atomicfile.Unsynced); err != nil {
		return fmt.Errorf("whole-shard journal: %w", err)
	}
	if err := f.Commit(d); err != nil {
		return err
	}
	t.files[r.Name] = &file{rec: r, lastUse: time.Now().UnixNano()}
	t.used += r.Size
	t.made.Add(1)
	return nil
}

// Make keeps s as a whole-shard file, its bytes read by read. It reports
// whether the file is held when it returns: false, with a nil error, when
// the shard does not fit the quota, another call is making it, or read
// reports a byte missing or failing its check (the caller fetches it
// first).
func (t *Tier) Make(ctx context.Context, s Shard, read ReadFunc) (bool, error) {
	if s.Size <= 0 {
		return false, nil
	}
	name := Name(s.ID)
	if t.has(name) {
		return true, nil
	}
	if !t.reserve(name, s.Size) {
		return false, nil
	}
	f, err := atomicfile.Create(t.path(name))
	if err != nil {
		t.unreserve(name, s.Size)
		return false, fmt.Errorf("whole-shard file: %w", err)
	}
	defer f.Discard() // a no-op once committed
	sum, complete, err := copyShard(ctx, s.Size, read, f)
	if err != nil || !complete {
		t.unreserve(name, s.Size)
		return false, err
	}
	r := record{Name: name, Key: s.Key, ETag: s.ETag, Size: s.Size, Sum: sum}
	if err := t.commit(r, f, atomicfile.Durable); err != nil {
		return false, fmt.Errorf("whole-shard file of %s: %w", s.Key, err)
	}
	return true, nil
}

// copyShard writes size bytes that read gives to f and syncs it,
// returning the CRC32C of the bytes written; complete is false when read
// reported a byte missing or failing its check.
func copyShard(ctx context.Context, size int64, read ReadFunc, f *atomicfile.File) (sum uint32, complete bool, err error) {
	h := newSum()
	// Aligned chunks go to the disk with O_DIRECT, without a copy into the
	// page cache: the daemon's CPU and the memory of a mount that makes a
	// file of every shard read whole. A short last chunk is written
	// through the page cache.
	buf := aligned.Buffer(int(min(copyChunk, size)))
	direct := f.Direct(true) == nil
	for off := int64(0); off < size; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		p := buf[:min(int64(len(buf)), size-off)]
		if !read(p, off) {
			return 0, false, nil
		}
		h.Write(p)
		if direct && !aligned.Is(p) {
			if err := f.Direct(false); err != nil {
				return 0, false, fmt.Errorf("whole-shard file: %w", err)
			}
			direct = false
		}
		if _, err := f.Write(p); err != nil {
			return 0, false, fmt.Errorf("whole-shard file: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, false, fmt.Errorf("whole-shard file: %w", err)
	}
	return h.Sum32(), true, nil
}

// OpenFile returns a read-only descriptor of s's file when the tier holds
// the complete file of s's version and it passes its check: the first
// open of a file in this process's life reads it whole and compares its
// CRC32C with the journal's record, as does the first open after the file
// changed (size, mtime, ctime or inode). It marks the file used. It
// reports false when the tier does not hold the file, when the file fails
// its check (it is then dropped, counted and logged) and when it changes
// or is dropped while being checked (the next open checks it again). The
// caller closes the descriptor. The file may be evicted while open; the
// descriptor keeps reading its bytes.
func (t *Tier) OpenFile(s Shard) (*os.File, bool) {
	name := Name(s.ID)
	t.mu.Lock()
	f, ok := t.files[name]
	t.mu.Unlock()
	if !ok || f.rec.Size != s.Size {
		return nil, false
	}
	f.check.Lock()
	defer f.check.Unlock()
	fd, err := cachedir.OpenPrivate(t.path(name), os.O_RDONLY)
	if err != nil {
		t.log.Warn("whole-shard file unreadable; dropped", "file", t.path(name), "err", err)
		t.drop(f, false)
		return nil, false
	}
	before, err := stampOf(fd)
	if err == nil && before != f.checked {
		t.checks.Add(1)
		if reason := checkWhole(fd, f.rec); reason != "" {
			fd.Close()
			t.checkFails.Add(1)
			t.log.Warn("whole-shard file fails its check; dropped, its shard is read through the daemon",
				"file", t.path(name), "key", f.rec.Key, "reason", reason)
			t.drop(f, true)
			return nil, false
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	after, serr := stampOf(fd)
	if err != nil || serr != nil || after != before || t.files[name] != f {
		fd.Close()
		return nil, false
	}
	now := time.Now()
	f.lastUse = now.UnixNano()
	_ = os.Chtimes(t.path(name), now, now) // the order of use survives a restart
	// The touch changed the file's mtime and ctime: what is remembered
	// is the stamp it left. A write between the stat above and the touch
	// would go unseen, as would one just after this open returns: the
	// check vouches for the bytes as they were when handed out.
	f.checked, _ = stampOf(fd)
	t.opens.Add(1)
	return fd, true
}

// MarkChecked remembers s's held file as checked in its present state:
// its bytes were summed as this process made it (Make), so its first
// open need not read it again.
func (t *Tier) MarkChecked(s Shard) {
	name := Name(s.ID)
	t.mu.Lock()
	f := t.files[name]
	t.mu.Unlock()
	if f == nil {
		return
	}
	fd, err := cachedir.OpenPrivate(t.path(name), os.O_RDONLY)
	if err != nil {
		return
	}
	defer fd.Close()
	st, err := stampOf(fd)
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
func (t *Tier) drop(f *file, forget bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files[f.rec.Name] != f {
		return
	}
	t.dropLocked(f.rec.Name)
	if !forget {
		return
	}
	if err := appendRecord(t.journal, record{Name: f.rec.Name}, true); err != nil {
		// The file is gone; the next open drops the record that names it.
		t.log.Warn("whole-shard journal: record of a dropped file not removed", "file", t.path(f.rec.Name), "err", err)
	}
}

// Has reports whether the tier holds s's version whole.
func (t *Tier) Has(s Shard) bool { return t.has(Name(s.ID)) }

func (t *Tier) has(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.files[name]
	return ok
}

// Stats returns the tier's figures.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	files, bytes := int64(len(t.files)), t.used
	t.mu.Unlock()
	return Stats{
		Files: files, Bytes: bytes, Quota: t.quota,
		Made: t.made.Load(), Evictions: t.evictions.Load(), Opens: t.opens.Load(),
		Checks: t.checks.Load(), CheckFails: t.checkFails.Load(),
	}
}

// Close closes the journal. The caller makes sure no call is in flight.
func (t *Tier) Close() error { return t.journal.Close() }
