package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/cache/wholefile"
)

// DirStats describes a cache dir as found on disk.
type DirStats struct {
	Dir        string
	RingFile   string // "" when the dir holds no ring
	FileBytes  int64  // size of the ring file
	BlockSize  int64
	Slots      int64
	UsedSlots  int64 // slots holding a current block
	UsedBytes  int64 // bytes of those blocks
	Versions   int   // distinct object versions with blocks in the ring
	WholeFiles int64 // whole-shard files vouched for by the journal and present
	WholeBytes int64 // their bytes
	OwnerPID   int   // pid of the process that owns the dir, 0 when none
}

// BadSlot is a ring slot that would not be served.
type BadSlot struct {
	Slot      int64
	Namespace string
	Key       string // "" when the header itself is unreadable
	Index     int64  // block index within the object
	Reason    string
}

// VerifyReport is the result of checking every slot of a ring and every
// whole-shard file.
type VerifyReport struct {
	Slots   int64 // slots in the ring
	Checked int64 // slots with a valid header, whose data was read and CRC-checked
	Good    int64 // checked slots whose data passed
	Bad     []BadSlot

	WholeChecked int64 // whole-shard files read and summed
	WholeGood    int64
	BadWhole     []wholefile.BadFile // deleted: a later read is served from the ring or the store
}

// InspectDir reads a cache dir's ring headers. It takes no lock, so it works
// while a mount owns the dir (figures may then lag by a few blocks).
func InspectDir(dir string) (DirStats, error) {
	ds := DirStats{Dir: dir}
	if _, err := os.Stat(dir); err != nil {
		return ds, fmt.Errorf("cache dir: %w", err)
	}
	ds.OwnerPID = cachedir.Holder(dir)
	r, size, err := loadRing(dir)
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
	ds.WholeFiles, ds.WholeBytes = wholefile.Inspect(dir)
	return ds, nil
}

// VerifyDir reads every slot of a cache dir's ring that has a header,
// including slots superseded by a newer copy of their block, and checks the
// data against every CRC its header holds (chunks and grains), then
// recomputes the CRC32C of every whole-shard file and deletes those that
// differ from their journal record (or have none). It refuses with
// ErrLocked while a mount owns the dir.
func VerifyDir(dir string) (VerifyReport, error) {
	var rep VerifyReport
	unlock, err := lockExisting(dir)
	if err != nil {
		return rep, err
	}
	defer unlock()
	whole, err := wholefile.Verify(dir)
	rep.WholeChecked, rep.WholeGood, rep.BadWhole = whole.Checked, whole.Good, whole.Bad
	if err != nil {
		return rep, err
	}
	r, size, err := loadRing(dir)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer r.file.close()
	rep.Slots = r.geo.slots
	buf := alignedBuffer(int(r.geo.blockSize))
	err = scanHeaders(context.Background(), r.file, r.geo, size, func(n int64, h slotHeader, st headerState) {
		bad := BadSlot{Slot: n, Namespace: h.Namespace, Key: h.Key, Index: h.Index}
		switch {
		case st == headerEmpty:
			return
		case st == headerDamaged:
			bad.Reason = "unreadable slot header"
		case r.geo.dataOffset(n)+alignUp(h.Length) > size:
			bad.Reason = "data lies past the end of the ring file"
		default:
			rep.Checked++
			err := r.readVerified(slotRef{n: n, length: h.Length, sums: h.Chunks}, buf)
			if err == nil && !verifyChunks(buf[:h.Length], 0, h.Length, r.grain(), h.Grains[:]) {
				// The CRCs a small read checks, as well as those a whole-block read does.
				err = errChecksum
			}
			if err == nil {
				rep.Good++
				return
			}
			bad.Reason = "data fails its CRC32C"
			if !errors.Is(err, errChecksum) {
				bad.Reason = err.Error()
			}
		}
		rep.Bad = append(rep.Bad, bad)
	})
	return rep, err
}

// ClearDir empties a cache dir's ring and whole-shard files, and deletes
// subdirs of it (what other packages keep there: persisted listings and
// member indexes). It refuses with ErrLocked while a mount owns the dir.
func ClearDir(dir string, subdirs ...string) error {
	unlock, err := lockExisting(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(ringPath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear cache: %w", err)
	}
	for _, sub := range append([]string{wholefile.DirName}, subdirs...) {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("clear cache: %w", err)
		}
	}
	return nil
}

// lockExisting takes the lock of a dir that must already exist.
func lockExisting(dir string) (unlock func(), err error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	l, err := cachedir.LockDir(dir)
	if err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}

// loadRing opens a dir's ring read-only and rebuilds its index.
func loadRing(dir string) (*ring, int64, error) {
	file, err := openRingFile(ringPath(dir), os.O_RDONLY)
	if err != nil {
		return nil, 0, fmt.Errorf("open cache ring: %w", err)
	}
	fi, err := file.f.Stat()
	if err != nil {
		file.close()
		return nil, 0, fmt.Errorf("stat cache ring: %w", err)
	}
	super := alignedBuffer(superSize)
	geo, ok := geometry{}, false
	if fi.Size() >= int64(superSize) && file.readFull(super, 0) == nil {
		geo, ok = decodeSuper(super)
	}
	if !ok {
		file.close()
		return nil, 0, fmt.Errorf("cache ring %s: no valid superblock", file.path)
	}
	r := newRing(file, geo, &counters{})
	if _, err := r.rebuild(context.Background(), fi.Size()); err != nil {
		file.close()
		return nil, 0, err
	}
	return r, fi.Size(), nil
}
