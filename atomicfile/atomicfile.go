package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// Durability is what a replaced file survives once the call that
// replaced it returns.
type Durability int

const (
	// Atomic: a crash or a kill leaves the old file or the new one; a
	// power loss may bring the old one back (the rename is not synced).
	Atomic Durability = iota
	// Durable: as Atomic, and the new file survives a power loss (its
	// directory is synced after the rename).
	Durable
	// Unsynced: nothing is synced. A crash or a power loss may leave the
	// old file, or the new one with some of its bytes not on the disk:
	// only for a file whose reader checks its bytes before it uses them.
	Unsynced
)

func (d Durability) String() string {
	switch d {
	case Durable:
		return "durable"
	case Unsynced:
		return "unsynced"
	}
	return "atomic"
}

// File is a replacement of path being written. Commit puts it in place;
// Discard, a no-op after Commit, removes it.
type File struct {
	pending   *renameio.PendingFile
	path      string
	committed bool // renamed in place without renameio (Unsynced)
}

// Create starts a replacement of path: a new 0600 file in path's
// directory, which is also where a crash leaves it (see IsTemp).
func Create(path string) (*File, error) {
	p, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return nil, err
	}
	return &File{pending: p, path: path}, nil
}

// Name is the file being written (not the target).
func (f *File) Name() string { return f.pending.Name() }

func (f *File) Write(p []byte) (int, error) { return f.pending.Write(p) }

// Sync flushes what was written to the disk, before Commit when the
// caller must order it before something else.
func (f *File) Sync() error { return f.pending.Sync() }

// Direct turns O_DIRECT on or off for the writes that follow: a large file
// written from aligned buffers (golang.org/x/sys/unix's rules: address,
// length and file offset multiples of the logical block size) goes to the
// disk without a copy into the page cache. An error (a filesystem that
// refuses O_DIRECT) leaves the file as it was.
func (f *File) Direct(on bool) error {
	fd := int(f.pending.Fd())
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.O_DIRECT
	} else {
		flags &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags)
	return err
}

// Commit syncs (but for Unsynced) and closes the file and renames it over
// the target, then, for Durable, syncs the target's directory.
func (f *File) Commit(d Durability) error {
	if d == Unsynced {
		// renameio always syncs the file: close and rename it here.
		if err := f.pending.File.Close(); err != nil {
			f.pending.Cleanup()
			return err
		}
		if err := os.Rename(f.pending.Name(), f.path); err != nil {
			os.Remove(f.pending.Name())
			return err
		}
		f.committed = true
		return nil
	}
	if err := f.pending.CloseAtomicallyReplace(); err != nil {
		f.pending.Cleanup()
		return err
	}
	if d == Durable {
		return syncDir(filepath.Dir(f.path))
	}
	return nil
}

// Discard closes and removes the file unless it was committed.
func (f *File) Discard() {
	if !f.committed {
		f.pending.Cleanup()
	}
}

// Write replaces path with what write writes (through a buffer), with
// durability d. On any error path is left as it was.
func Write(path string, d Durability, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Discard()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Commit(d)
}

// WriteFile replaces path with data, with durability d.
func WriteFile(path string, d Durability, data []byte) error {
	return Write(path, d, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// IsTemp reports whether name, a directory entry, has the form of a file
// this package writes before its rename: a dot, the target's name, and
// decimal digits. Only the owner of a directory, which knows no other
// writer uses such names there, should remove what it names.
func IsTemp(name string) bool {
	if len(name) < 3 || name[0] != '.' {
		return false
	}
	base := strings.TrimRight(name[1:], "0123456789")
	return base != "" && len(base) < len(name)-1
}

// RemoveTemps removes what a killed writer of path left in its directory:
// the files of IsTemp's form made for path. No write of path may be under
// way, in this process or another.
func RemoveTemps(path string) error {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if digits, ok := strings.CutPrefix(n, "."+base); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("remove leftover %s: %w", n, err)
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteAt writes p at off (pwrite), for a file written out of order; safe
// for concurrent use on disjoint ranges.
func (f *File) WriteAt(p []byte, off int64) (int, error) { return f.pending.WriteAt(p, off) }

// Truncate sets the file's size, for a file whose last write was padded
// (an O_DIRECT write of a whole aligned buffer).
func (f *File) Truncate(size int64) error { return f.pending.Truncate(size) }
