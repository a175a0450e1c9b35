package cachedir

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// A cache directory holds copies of every shard a mount read: only the
// user the daemon runs as may read it, and nothing in it may be a link
// planted by someone else, or the daemon would truncate or write through
// it. CheckDir vets the directory; OpenPrivate every file in it.

// CheckDir creates dir (mode 0700) when it is absent, and refuses one the
// daemon must not use: not a directory, owned by another user, or
// writable by group or others. Each refusal is one line naming the fix.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("cache dir %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("cache dir %s is not a directory", dir)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("cache dir %s is owned by uid %d, not by this user (uid %d): refusing to keep shard bytes there; use a directory of your own", dir, st.Uid, uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("cache dir %s is writable by group or others (mode %#o): refusing it; chmod 700 %s", dir, st.Mode&0o777, dir)
	}
	return nil
}

// OpenPrivate opens path, creating it 0600 when flag says so, without
// following a symlink, and refuses anything but a regular file of this
// user's with one link: a hard link planted in the directory would
// otherwise be truncated or written through. A file an older release
// created readable by others is made private.
func OpenPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symlink: refusing to follow it", path)
	}
	if err != nil {
		return nil, err
	}
	if err := checkPrivate(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkPrivate(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	switch uid := uint32(os.Geteuid()); {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file: refusing it", f.Name())
	case st.Uid != uid:
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d): refusing it", f.Name(), st.Uid, uid)
	case st.Nlink != 1:
		return fmt.Errorf("%s has %d links: refusing a file linked from elsewhere", f.Name(), st.Nlink)
	}
	if st.Mode&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("make %s private: %w", f.Name(), err)
		}
	}
	return nil
}
