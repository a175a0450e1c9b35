package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/sys/mountinfo"
)

// checkMountpoint resolves dir and refuses one that is missing, not a
// directory, or already a mount point.
func checkMountpoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("mountpoint %q: %w", dir, err)
	}
	st, err := os.Stat(abs)
	switch {
	case os.IsNotExist(err):
		return "", fmt.Errorf("mountpoint %s does not exist", abs)
	case err != nil:
		return "", fmt.Errorf("mountpoint %s: %w", abs, err)
	case !st.IsDir():
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	mounted, err := isMounted(abs)
	if err != nil {
		return "", err
	}
	if mounted {
		return "", fmt.Errorf("mountpoint %s is already mounted (shardfs unmount %s)", abs, abs)
	}
	return abs, nil
}

// isMounted reports whether dir is the mount point of a mount in this
// process's namespace. It reads the mount table rather than comparing
// device numbers: stat of a FUSE mount whose daemon is gone hangs or fails.
func isMounted(dir string) (bool, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil {
		return false, fmt.Errorf("reading mount table: %w", err)
	}
	return len(mounts) > 0, nil
}
