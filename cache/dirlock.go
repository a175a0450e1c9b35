package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dirLock is the exclusive ownership of a cache directory: an flock on
// DIR/lock, which holds the owner's pid so a refused process can name it.
// The kernel drops the flock when the owner dies, so kill -9 leaves no stale
// lock behind.
type dirLock struct {
	f *os.File
}

// lockDir takes dir's lock, or fails with ErrLocked naming the holder.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := openPrivate(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("cache lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, lockedError(dir)
		}
		return nil, fmt.Errorf("cache lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) unlock() error {
	// Closing the descriptor releases the flock.
	return l.f.Close()
}

func lockedError(dir string) error {
	if pid := lockHolder(dir); pid > 0 {
		return fmt.Errorf("cache dir %s is in use by pid %d: %w", dir, pid, ErrLocked)
	}
	return fmt.Errorf("cache dir %s is in use: %w", dir, ErrLocked)
}

// lockHolder returns the pid of the process that owns dir, or 0 when no
// process does.
func lockHolder(dir string) int {
	path := filepath.Join(dir, lockFileName)
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	// A shared lock succeeds only when nobody holds the exclusive one.
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
