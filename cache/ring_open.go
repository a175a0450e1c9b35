package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// headerChunk is how many headers one read of the header table covers.
const headerChunk = 256

// openRing opens (creating or reshaping as needed) the ring file in dir,
// preallocates it and rebuilds the index from its headers. The caller holds
// dir's lock.
func openRing(ctx context.Context, dir string, geo geometry, stats *counters, log *slog.Logger) (*ring, error) {
	// Lease extents name this path to other processes: make it absolute.
	abs, err := filepath.Abs(ringPath(dir))
	if err != nil {
		return nil, fmt.Errorf("cache ring path: %w", err)
	}
	file, err := openRingFile(abs, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("open cache ring: %w", err)
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
		log.Info("cache ring has another block or cache size; starting it empty", "file", file.path)
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
		*s = slot{key: k, length: h.Length, crc: h.DataCRC, gen: h.Generation, state: slotValid}
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
