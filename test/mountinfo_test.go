//go:build e2e

package test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// mountEntries counts the entries for dir in a mount table: /proc/mounts
// (mount point in field 2) or /proc/self/mountinfo (field 5).
func mountEntries(table, dir string) (int, error) {
	field := 1
	if strings.HasSuffix(table, "mountinfo") {
		field = 4
	}
	f, err := os.Open(table)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return countMountPoint(f, field, dir)
}

func countMountPoint(r io.Reader, field int, dir string) (int, error) {
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > field && unescapeMountPath(fields[field]) == dir {
			n++
		}
	}
	return n, sc.Err()
}

// unescapeMountPath undoes the kernel's octal escapes (\040 for space...).
func unescapeMountPath(s string) string {
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

func isMounted(dir string) bool {
	n, err := mountEntries("/proc/self/mountinfo", dir)
	return err == nil && n > 0
}

// waitMountState waits until dir is (or is no longer) a mount point. The
// kernel wakes poll(2) on /proc/self/mountinfo with POLLPRI whenever the
// mount table changes, so this sleeps on events, not on a timer. It gives up
// when gone (if not nil) is closed or the timeout passes.
func waitMountState(dir string, mounted bool, gone <-chan struct{}, timeout time.Duration) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		n, err := countMountPoint(f, 4, dir)
		if err != nil {
			return err
		}
		if (n > 0) == mounted {
			return nil
		}
		select {
		case <-gone:
			return fmt.Errorf("shardfs exited before %s was %s", dir, map[bool]string{true: "mounted", false: "unmounted"}[mounted])
		default:
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s: still %s after %v", dir, map[bool]string{true: "not mounted", false: "mounted"}[mounted], timeout)
		}
		// Wake at least every 200ms to notice the process exiting.
		wait := min(left, 200*time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(wait/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return fmt.Errorf("poll mountinfo: %w", err)
		}
	}
}
