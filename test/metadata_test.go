package test

import (
	"errors"
	"os"
	"regexp"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNoXattrsAnsweredByTheKernel checks that `ls -l` style xattr reads
// stay in the kernel: the first getxattr reaches the daemon, which says the
// mount has no extended attributes, and later ones on any file do not.
// Writes of xattrs are still refused with EROFS.
func TestNoXattrsAnsweredByTheKernel(t *testing.T) {
	m := mountShardfs(t, e2e.data, "--debug-fuse")
	files := []string{m.path("shard-000000.tar"), m.path("shard-000001.tar"), m.path("nested/deeper")}
	buf := make([]byte, 256)
	for range 3 {
		for _, f := range files {
			for _, name := range []string{"security.selinux", "system.posix_acl_access", "user.anything"} {
				// The kernel answers an ACL read "no ACL" (ENODATA)
				// once it knows there are no xattrs.
				_, err := unix.Lgetxattr(f, name, buf)
				if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENODATA) {
					t.Fatalf("getxattr %s %s: %v, want EOPNOTSUPP or ENODATA (no xattrs on this mount)", f, name, err)
				}
			}
			if _, err := unix.Llistxattr(f, buf); !errors.Is(err, unix.EOPNOTSUPP) {
				t.Fatalf("listxattr %s: %v, want EOPNOTSUPP", f, err)
			}
		}
	}
	if err := unix.Setxattr(files[0], "user.shardfs", []byte("x"), 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("setxattr: %v, want EROFS", err)
	}
	// A LOOKUP of a missing name, once logged, means every request before
	// it is logged too.
	if _, err := os.Stat(m.path("no-such-shard-xattr")); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing shard: %v", err)
	}
	if err := m.waitLogged(`"no-such-shard-xattr`, mountTimeout); err != nil {
		t.Fatal(err)
	}
	log := m.output.String()
	if n := len(regexp.MustCompile(`\bGETXATTR\b`).FindAllString(log, -1)); n != 1 {
		t.Errorf("27 getxattr calls reached the daemon %d times, want once (then the kernel knows there are none)", n)
	}
	if n := len(regexp.MustCompile(`\bLISTXATTR\b`).FindAllString(log, -1)); n != 1 {
		t.Errorf("9 listxattr calls reached the daemon %d times, want once", n)
	}
}
