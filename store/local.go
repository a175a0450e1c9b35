package store

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Local serves the regular files under a directory (a local disk or an NFS
// mount). Its ETag is derived from size, mtime and inode, so a file replaced
// or rewritten after listing reads as ErrChanged, like a 412 from S3.
type Local struct {
	root string
}

var _ Store = (*Local)(nil)

// NewLocal opens the directory root. It fails when root is not a directory.
func NewLocal(root string) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("source directory %s: %w", abs, ErrNotFound)
		}
		return nil, fmt.Errorf("source directory %s: %w", abs, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("source %s is not a directory", abs)
	}
	return &Local{root: abs}, nil
}

func (l *Local) String() string { return l.root }

func (l *Local) List(ctx context.Context) ([]Object, error) {
	var objs []Object
	err := filepath.WalkDir(l.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("list %s: %w", path, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("list %s: %w", path, err)
		}
		rel, err := filepath.Rel(l.root, path)
		if err != nil {
			return err
		}
		objs = append(objs, l.object(filepath.ToSlash(rel), info))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortObjects(objs)
	return objs, nil
}

func (l *Local) Stat(ctx context.Context, key string) (Object, error) {
	path, err := l.path(key)
	if err != nil {
		return Object{}, err
	}
	info, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return Object{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
		}
		return Object{}, fmt.Errorf("stat %s: %w", key, err)
	}
	if !info.Mode().IsRegular() {
		return Object{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	return l.object(key, info), nil
}

func (l *Local) ReadRange(ctx context.Context, obj Object, off int64, p []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if off < 0 || off > obj.Size {
		return 0, fmt.Errorf("read %s at %d: %w", obj.Key, off, ErrInvalidRange)
	}
	path, err := l.path(obj.Key)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, fmt.Errorf("read %s: %w", obj.Key, ErrChanged)
		}
		return 0, fmt.Errorf("read %s: %w", obj.Key, err)
	}
	defer f.Close()
	if err := l.checkVersion(f, obj); err != nil {
		return 0, err
	}
	want := p
	if rest := obj.Size - off; int64(len(want)) > rest {
		want = want[:rest]
	}
	n, err := f.ReadAt(want, off)
	if err != nil && err != io.EOF {
		return n, fmt.Errorf("read %s at %d: %w", obj.Key, off, err)
	}
	// Check again after reading: a rewrite during the read must not leak
	// bytes of two versions.
	if err := l.checkVersion(f, obj); err != nil {
		return 0, err
	}
	if n < len(want) {
		return n, fmt.Errorf("read %s at %d: short read: %w", obj.Key, off, io.ErrUnexpectedEOF)
	}
	if len(want) < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (l *Local) checkVersion(f *os.File, obj Object) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read %s: %w", obj.Key, err)
	}
	if got := l.object(obj.Key, info); got.ETag != obj.ETag {
		return fmt.Errorf("read %s: etag %s, listed %s: %w", obj.Key, got.ETag, obj.ETag, ErrChanged)
	}
	return nil
}

// path maps a key to a file under root, refusing keys that escape it.
func (l *Local) path(key string) (string, error) {
	clean := filepath.Clean("/" + key)
	if clean == "/" || strings.Contains(key, "\x00") {
		return "", fmt.Errorf("key %q: %w", key, ErrNotFound)
	}
	return filepath.Join(l.root, clean), nil
}

// object describes a file. Its ETag names the version by size, mtime,
// ctime and inode: a file rewritten in place with its mtime put back
// (rsync --inplace -t, touch -r) still gets a new ctime, which no user
// can set, so its cached blocks are never served for the new content.
func (l *Local) object(key string, info fs.FileInfo) Object {
	var ino uint64
	var ctime int64
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
		ctime = st.Ctim.Nano()
	}
	return Object{
		Key:     key,
		Size:    info.Size(),
		ETag:    fmt.Sprintf("%x-%x-%x-%x", info.Size(), info.ModTime().UnixNano(), ctime, ino),
		ModTime: info.ModTime(),
	}
}
