//go:build e2e

package test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestS3MountIsReadOnly(t *testing.T) {
	t.Parallel()
	before, err := e2e.listBucket(e2e.bucket)
	if err != nil {
		t.Fatal(err)
	}
	m := mountShardfs(t, e2e.source())
	checkWritesFail(t, m.dir)
	after, err := e2e.listBucket(e2e.bucket)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("bucket changed by writes through the mount:\nbefore %v\nafter  %v", before, after)
	}
}

func TestLocalMountIsReadOnly(t *testing.T) {
	t.Parallel()
	m := mountShardfs(t, e2e.data)
	checkWritesFail(t, m.dir)
	after, err := describeTree(e2e.data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e2e.objects, after) {
		t.Errorf("source directory changed by writes through the mount")
	}
}

// checkWritesFail tries every kind of write inside mnt; each must fail
// with EROFS.
func checkWritesFail(t *testing.T, mnt string) {
	// The mount is not flagged "ro" to the kernel: a loader must be able to
	// write its schedule into /.shardfs/hints. Every other write is refused
	// by the daemon with EROFS, checked below.
	hints := filepath.Join(mnt, ".shardfs", "hints")
	if err := os.WriteFile(hints, []byte("shard-000001.tar\n"), 0); err != nil {
		t.Errorf("writing the hints file: %v", err)
	}
	file := filepath.Join(mnt, "shard-000000.tar")
	dir := filepath.Join(mnt, "nested", "deeper")
	newPath := filepath.Join(mnt, "new-file")
	openWith := func(flag int) func() error {
		return func() error {
			f, err := os.OpenFile(file, flag, 0o644)
			if err == nil {
				f.Close()
			}
			return err
		}
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"open O_WRONLY", openWith(os.O_WRONLY)},
		{"open O_RDWR", openWith(os.O_RDWR)},
		{"open O_TRUNC", openWith(os.O_WRONLY | os.O_TRUNC)},
		{"open O_APPEND", openWith(os.O_WRONLY | os.O_APPEND)},
		{"create", func() error {
			f, err := os.OpenFile(newPath, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(mnt, "new-dir"), 0o755) }},
		{"rmdir", func() error { return syscall.Rmdir(dir) }},
		{"unlink", func() error { return os.Remove(file) }},
		{"rename file", func() error { return os.Rename(file, newPath) }},
		{"rename into dir", func() error { return os.Rename(file, filepath.Join(dir, "moved.tar")) }},
		{"rename dir", func() error { return os.Rename(dir, filepath.Join(mnt, "nested", "renamed")) }},
		{"truncate", func() error { return os.Truncate(file, 10) }},
		{"chmod", func() error { return os.Chmod(file, 0o600) }},
		{"chown", func() error { return os.Lchown(file, 1, 1) }},
		{"utimes", func() error { return os.Chtimes(file, time.Unix(1, 0), time.Unix(1, 0)) }},
		{"symlink", func() error { return os.Symlink("shard-000000.tar", newPath) }},
		{"link", func() error { return os.Link(file, newPath) }},
		{"mknod", func() error { return syscall.Mknod(newPath, syscall.S_IFIFO|0o644, 0) }},
		{"setxattr", func() error { return unix.Setxattr(file, "user.shardfs", []byte("x"), 0) }},
		{"removexattr", func() error { return unix.Removexattr(file, "user.shardfs") }},
		// The hints file takes writes, and nothing else.
		{"chmod hints", func() error { return os.Chmod(hints, 0o600) }},
		{"chown hints", func() error { return os.Lchown(hints, 1, 1) }},
		{"utimes hints", func() error { return os.Chtimes(hints, time.Unix(1, 0), time.Unix(1, 0)) }},
		{"truncate hints to 10", func() error { return os.Truncate(hints, 10) }},
		{"unlink hints", func() error { return os.Remove(hints) }},
	}
	for _, o := range ops {
		if err := o.op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s inside the mount: %v, want EROFS", o.name, err)
		}
	}
	if _, err := os.Lstat(newPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after the failed writes (stat: %v)", newPath, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		t.Errorf("stat %s after the failed writes: %v", file, err)
	}
}
