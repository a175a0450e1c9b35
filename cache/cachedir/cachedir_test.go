package cachedir

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A second LockDir of a dir is refused with ErrLocked naming the holder;
// Holder names it while the lock is held and no one after Unlock.
func TestLockDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	if pid := Holder(dir); pid != 0 {
		t.Fatalf("Holder of a dir never locked = %d, want 0", pid)
	}
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if pid := Holder(dir); pid != os.Getpid() {
		t.Fatalf("Holder = %d, want this process %d", pid, os.Getpid())
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second LockDir = %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if pid := Holder(dir); pid != 0 {
		t.Fatalf("Holder after Unlock = %d, want 0", pid)
	}
	l, err = LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	l.Unlock()
}

// The owner record reads back while the process it names runs, is not
// believed once it has exited or when it is not a record, and goes with
// remove.
func TestOwnerRecord(t *testing.T) {
	dir := t.TempDir()
	if _, ok := ReadOwner(dir); ok {
		t.Fatal("an owner read from a dir without a record")
	}
	want := Owner{Source: "s3://bucket/wds", MountPoint: "/mnt/wds", PID: os.Getpid()}
	remove, err := WriteOwner(dir, want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, OwnerName)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("owner record %v (%v), want it private", fi.Mode().Perm(), err)
	}
	if got, ok := ReadOwner(dir); !ok || got != want {
		t.Fatalf("ReadOwner = %+v, %v; want %+v", got, ok, want)
	}
	remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the record outlived remove: %v", err)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteOwner(dir, Owner{Source: "x", MountPoint: "/mnt/x", PID: gone.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	if o, ok := ReadOwner(dir); ok {
		t.Fatalf("the record of an exited process was believed: %+v", o)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, ok := ReadOwner(dir); ok {
		t.Fatalf("a garbled record was believed: %+v", o)
	}
}
