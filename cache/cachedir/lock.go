package cachedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockName is the lock file's name in a cache dir.
const LockName = "lock"

// ErrLocked: another process owns the cache directory. The wrapping error
// names the holder's pid.
var ErrLocked = errors.New("cache directory is locked by another process")

// Lock is the exclusive ownership of a cache directory: an flock on
// DIR/lock, which holds the owner's pid so a refused process can name it.
// The kernel drops the flock when the owner dies, so kill -9 leaves no stale
// lock behind.
type Lock struct {
	f *os.File
}

// LockDir takes dir's lock, or fails with ErrLocked naming the holder.
func LockDir(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	f, err := OpenPrivate(path, os.O_RDWR|os.O_CREATE)
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
	return &Lock{f: f}, nil
}

// Unlock gives the directory up.
func (l *Lock) Unlock() error {
	// Closing the descriptor releases the flock.
	return l.f.Close()
}

func lockedError(dir string) error {
	if pid := Holder(dir); pid > 0 {
		return fmt.Errorf("cache dir %s is in use by pid %d: %w", dir, pid, ErrLocked)
	}
	return fmt.Errorf("cache dir %s is in use: %w", dir, ErrLocked)
}

// Holder returns the pid of the process that owns dir, or 0 when no
// process does. It takes no lock.
func Holder(dir string) int {
	path := filepath.Join(dir, LockName)
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
