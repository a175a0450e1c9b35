package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// DirStats describes a cache dir as found on disk.
type DirStats struct {
	Dir       string
	RingFile  string // "" when the dir holds no ring
	FileBytes int64  // size of the ring file
	BlockSize int64
	Slots     int64
	UsedSlots int64 // slots holding a current block
	UsedBytes int64 // bytes of those blocks
	Versions  int   // distinct object versions with blocks in the ring
	OwnerPID  int   // pid of the process that owns the dir, 0 when none
}

// BadSlot is a ring slot that would not be served.
type BadSlot struct {
	Slot      int64
	Namespace string
	Key       string // "" when the header itself is unreadable
	Index     int64  // block index within the object
	Reason    string
}

// VerifyReport is the result of checking every slot of a ring.
type VerifyReport struct {
	Slots   int64 // slots in the ring
	Checked int64 // slots holding a block, all read and CRC-checked
	Good    int64
	Bad     []BadSlot
}

// InspectDir reads a cache dir's ring headers. It takes no lock, so it works
// while a mount owns the dir (figures may then lag by a few blocks).
func InspectDir(dir string) (DirStats, error) {
	ds := DirStats{Dir: dir}
	if _, err := os.Stat(dir); err != nil {
		return ds, fmt.Errorf("cache dir: %w", err)
	}
	ds.OwnerPID = lockHolder(dir)
	r, size, _, err := loadRing(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ds, nil
	}
	if err != nil {
		return ds, err
	}
	defer r.file.close()
	ds.RingFile, ds.FileBytes = r.file.path, size
	ds.BlockSize, ds.Slots = r.geo.blockSize, r.geo.slots
	ds.UsedBytes, ds.UsedSlots = r.occupancy()
	versions := make(map[versionID]bool)
	for k := range r.index {
		versions[k.version] = true
	}
	ds.Versions = len(versions)
	return ds, nil
}

// VerifyDir reads every block of a cache dir's ring and checks its CRC. It
// refuses with ErrLocked while a mount owns the dir.
func VerifyDir(dir string) (VerifyReport, error) {
	var rep VerifyReport
	unlock, err := lockExisting(dir)
	if err != nil {
		return rep, err
	}
	defer unlock()
	r, _, rebuilt, err := loadRing(dir)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer r.file.close()
	rep.Slots = r.geo.slots
	for _, n := range rebuilt.damaged {
		rep.Bad = append(rep.Bad, BadSlot{Slot: n, Reason: "unreadable slot header"})
	}
	for _, n := range rebuilt.truncated {
		rep.Bad = append(rep.Bad, r.describe(n, "data lies past the end of the ring file"))
	}
	buf := alignedBuffer(int(r.geo.blockSize))
	for n := range r.geo.slots {
		if r.slots[n].state != slotValid {
			continue
		}
		rep.Checked++
		ref := r.pinLocked(n)
		err := r.readVerified(ref, buf)
		r.unpin(n)
		switch {
		case err == nil:
			rep.Good++
		case errors.Is(err, errChecksum):
			rep.Bad = append(rep.Bad, r.describe(n, "data fails its CRC32C"))
		default:
			rep.Bad = append(rep.Bad, r.describe(n, err.Error()))
		}
	}
	return rep, nil
}

// ClearDir empties a cache dir's ring. It refuses with ErrLocked while a
// mount owns the dir.
func ClearDir(dir string) error {
	unlock, err := lockExisting(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(ringPath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear cache: %w", err)
	}
	return nil
}

// lockExisting takes the lock of a dir that must already exist.
func lockExisting(dir string) (unlock func(), err error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	l, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return func() { l.unlock() }, nil
}

// loadRing opens a dir's ring read-only and rebuilds its index.
func loadRing(dir string) (*ring, int64, rebuildReport, error) {
	var rep rebuildReport
	file, err := openRingFile(ringPath(dir), os.O_RDONLY)
	if err != nil {
		return nil, 0, rep, fmt.Errorf("open cache ring: %w", err)
	}
	fi, err := file.f.Stat()
	if err != nil {
		file.close()
		return nil, 0, rep, fmt.Errorf("stat cache ring: %w", err)
	}
	super := alignedBuffer(superSize)
	geo, ok := geometry{}, false
	if fi.Size() >= int64(superSize) && file.readFull(super, 0) == nil {
		geo, ok = decodeSuper(super)
	}
	if !ok {
		file.close()
		return nil, 0, rep, fmt.Errorf("cache ring %s: no valid superblock", file.path)
	}
	r := newRing(file, geo, &counters{})
	rep, err = r.rebuild(context.Background(), fi.Size())
	if err != nil {
		file.close()
		return nil, 0, rep, err
	}
	return r, fi.Size(), rep, nil
}

// describe names the block whose header is in slot n, for a report.
func (r *ring) describe(n int64, reason string) BadSlot {
	bad := BadSlot{Slot: n, Reason: reason}
	buf := alignedBuffer(headerSize)
	if r.file.readFull(buf, r.geo.headerOffset(n)) == nil {
		if h, st := decodeHeader(buf, r.geo.blockSize); st == headerValid {
			bad.Namespace, bad.Key, bad.Index = h.Namespace, h.Key, h.Index
		}
	}
	return bad
}
