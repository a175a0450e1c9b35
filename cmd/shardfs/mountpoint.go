package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// process's namespace, from /proc/self/mountinfo.
func isMounted(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
