package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// headerChunk is how many headers one read of the header table covers.
const headerChunk = 256

// openRing opens (creating as needed) the ring file in cfg.Dir, chooses
// its shape (chooseGeometry), preallocates it and rebuilds the index from
// its headers. The caller holds the dir's lock.
func openRing(ctx context.Context, cfg Config, stats *counters, log *slog.Logger) (*ring, error) {
	// Lease extents name this path to other processes: make it absolute.
	abs, err := filepath.Abs(ringPath(cfg.Dir))
	if err != nil {
		return nil, fmt.Errorf("cache ring path: %w", err)
	}
	file, err := openRingFile(abs, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("open cache ring: %w", err)
	}
	geo, err := chooseGeometry(file, cfg, log)
	if err != nil {
		file.close()
		return nil, err
	}
	r, err := prepareRing(ctx, file, geo, stats, log)
	if err != nil {
		file.close()
		return nil, err
	}
	return r, nil
}

func prepareRing(ctx context.Context, file *ringFile, geo geometry, stats *counters, log *slog.Logger) (*ring, error) {
	validBytes, err := keptBytes(file, geo, log)
	if err != nil {
		return nil, err
	}
	if err := preallocate(file, geo.fileSize()); err != nil {
		return nil, err
	}
	if validBytes == 0 {
		super := alignedBuffer(superSize)
		geo.encodeSuper(super)
		if err := file.writeFull(super, 0); err != nil {
			return nil, err
		}
	}
	r := newRing(file, geo, stats)
	rep, err := r.rebuild(ctx, validBytes)
	if err != nil {
		return nil, err
	}
	bytes, slots := r.occupancy()
	log.Info("cache ring opened", "file", file.path, "slots", geo.slots, "blocks", slots, "bytes", bytes,
		"damaged_headers", rep.damaged, "truncated_blocks", rep.truncated, "direct_io", file.direct)
	return r, nil
}

// chooseGeometry decides the ring's shape. A ring already in the file
// keeps its shape when cfg asks for it or asks for no size; a ring of
// another shape is never emptied silently: Open fails with one line naming
// both shapes. A new ring without a size asked for is made to fit its
// filesystem, with a warning saying what was chosen.
func chooseGeometry(file *ringFile, cfg Config, log *slog.Logger) (geometry, error) {
	want := geometryFor(cfg.ringSize(), cfg.BlockSize)
	old, ok, err := existingGeometry(file)
	if err != nil {
		return geometry{}, err
	}
	if ok {
		switch {
		case old == want:
			return want, nil
		case old.blockSize != cfg.BlockSize:
			return geometry{}, fmt.Errorf("cache dir %s holds a ring in blocks of %s; --block-size %s would empty it: use --block-size %s, or clear it first (shardfs cache clear --cache-dir %s)",
				cfg.Dir, humanize.IBytes(uint64(old.blockSize)), humanize.IBytes(uint64(cfg.BlockSize)), humanize.IBytes(uint64(old.blockSize)), cfg.Dir)
		case !cfg.SizeGiven:
			log.Info("cache ring keeps the size it was made with", "file", file.path, "bytes", old.fileSize())
			return old, nil
		default:
			return geometry{}, fmt.Errorf("cache dir %s holds a ring of %s (%d bytes); --cache-size %s would empty it: leave --cache-size out (or give %d) to keep its blocks, or clear it first (shardfs cache clear --cache-dir %s) to resize",
				cfg.Dir, humanize.IBytes(uint64(old.fileSize())), old.fileSize(), humanize.IBytes(uint64(cfg.Size)), sizeForRing(old.fileSize(), cfg.WholeShardPercent), cfg.Dir)
		}
	}
	if cfg.SizeGiven {
		return want, nil
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(file.f.Fd()), &fs); err != nil {
		return geometry{}, fmt.Errorf("statfs cache dir: %w", err)
	}
	room := ringShare(int64(fs.Bavail)*fs.Bsize/10*9, cfg.WholeShardPercent)
	if want.fileSize() <= room {
		return want, nil
	}
	fit := geometryFor(room, cfg.BlockSize)
	if fit.slots < minSlots {
		return geometry{}, fmt.Errorf("cache dir %s: its filesystem has %s free, too little for a ring cache; free some space or give --cache-dir elsewhere",
			cfg.Dir, humanize.IBytes(uint64(fs.Bavail)*uint64(fs.Bsize)))
	}
	log.Warn("cache ring made smaller than the default to fit its filesystem; --cache-size sets it", "effect", "a smaller ring", "dir", cfg.Dir,
		"size", humanize.IBytes(uint64(fit.fileSize())), "default", humanize.IBytes(uint64(want.fileSize())),
		"free", humanize.IBytes(uint64(fs.Bavail)*uint64(fs.Bsize)))
	return fit, nil
}

// existingGeometry reads the shape of the ring already in file, if any.
func existingGeometry(file *ringFile) (geometry, bool, error) {
	fi, err := file.f.Stat()
	if err != nil {
		return geometry{}, false, fmt.Errorf("stat cache ring: %w", err)
	}
	if fi.Size() < int64(superSize) {
		return geometry{}, false, nil
	}
	super := alignedBuffer(superSize)
	if err := file.readFull(super, 0); err != nil {
		return geometry{}, false, err
	}
	g, ok := decodeSuper(super)
	return g, ok, nil
}

// keptBytes returns how many bytes of the existing file can be trusted: its
// size when the superblock matches geo, else 0 after emptying the file (a
// ring of another shape cannot be read as this one).
func keptBytes(file *ringFile, geo geometry, log *slog.Logger) (int64, error) {
	fi, err := file.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat cache ring: %w", err)
	}
	if fi.Size() >= int64(superSize) {
		super := alignedBuffer(superSize)
		if err := file.readFull(super, 0); err != nil {
			return 0, err
		}
		if old, ok := decodeSuper(super); ok && old == geo {
			return min(fi.Size(), geo.fileSize()), nil
		}
		if v := superFormat(super); v != 0 && v != superVersion {
			log.Warn("cache ring was written in another format; starting it empty (warm again to refill it)",
				"file", file.path, "format", v, "this_format", superVersion)
		} else {
			log.Info("cache ring has another block or cache size; starting it empty", "file", file.path)
		}
	}
	if fi.Size() > 0 {
		if err := file.f.Truncate(0); err != nil {
			return 0, fmt.Errorf("reset cache ring: %w", err)
		}
	}
	return 0, nil
}

// preallocate reserves size bytes for the file, failing early with ENOSPC
// rather than leaving a half-allocated ring behind.
func preallocate(file *ringFile, size int64) error {
	fd := int(file.f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat cache ring: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("statfs cache dir: %w", err)
	}
	need := size - st.Blocks*512
	if free := int64(fs.Bavail) * fs.Bsize; need > free {
		return fmt.Errorf("cache ring needs %d more bytes, the filesystem has %d free: %w", need, free, unix.ENOSPC)
	}
	err := unix.Fallocate(fd, 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = file.f.Truncate(size)
	}
	if err != nil {
		_ = file.f.Truncate(0)
		return fmt.Errorf("preallocate cache ring of %d bytes: %w", size, err)
	}
	// Only one size is ever allowed: a ring of the right geometry but a
	// longer file (written by hand) is cut back.
	if fi, err := file.f.Stat(); err == nil && fi.Size() > size {
		return file.f.Truncate(size)
	}
	return nil
}

// rebuildReport lists the slots whose headers could not be used.
type rebuildReport struct {
	damaged   int // header written but unreadable
	truncated int // header valid but its data lies past the end of the file
}

// rebuild fills the slot table from the headers on disk. Of two slots that
// hold the same block the newer wins. The head goes after the newest slot,
// so writing resumes by overwriting the oldest.
func (r *ring) rebuild(ctx context.Context, validBytes int64) (rebuildReport, error) {
	var rep rebuildReport
	r.mu.Lock()
	defer r.mu.Unlock()
	var newest uint64
	err := scanHeaders(ctx, r.file, r.geo, validBytes, func(n int64, h slotHeader, st headerState) {
		switch {
		case st == headerDamaged:
			rep.damaged++
			return
		case st == headerEmpty:
			return
		case r.geo.dataOffset(n)+alignUp(h.Length) > validBytes:
			rep.truncated++
			return
		}
		if h.Generation >= newest {
			newest = h.Generation
			r.head = (n + 1) % r.geo.slots
		}
		k := h.blockKey()
		if old, ok := r.index[k]; ok {
			if r.slots[old].gen > h.Generation {
				return
			}
			r.forgetLocked(old)
		}
		s := &r.slots[n]
		*s = slot{key: k, length: h.Length, sums: h.Chunks, grains: h.Grains.tableSum(), gen: h.Generation, state: slotValid}
		r.index[k] = n
		r.usedBytes += h.Length
		r.usedSlots++
	})
	r.nextGen = newest + 1
	return rep, err
}

// scanHeaders reads the header table in large chunks and calls fn for each
// slot. Headers past validBytes are reported empty.
func scanHeaders(ctx context.Context, file *ringFile, geo geometry, validBytes int64, fn func(n int64, h slotHeader, st headerState)) error {
	buf := alignedBuffer(headerChunk * headerSize)
	for first := int64(0); first < geo.slots; first += headerChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		count := min(headerChunk, geo.slots-first)
		off := geo.headerOffset(first)
		readable := min(count, max(validBytes-off, 0)/int64(headerSize))
		if readable > 0 {
			if err := file.readFull(buf[:readable*int64(headerSize)], off); err != nil {
				return err
			}
		}
		for i := range count {
			if i >= readable {
				fn(first+i, slotHeader{}, headerEmpty)
				continue
			}
			h, st := decodeHeader(buf[i*int64(headerSize):(i+1)*int64(headerSize)], geo.blockSize)
			fn(first+i, h, st)
		}
	}
	return nil
}
