//go:build e2e

package test

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNoXattrsAnsweredByTheKernel checks that `ls -l` style xattr reads
// stay in the kernel: the first getxattr reaches the daemon, which says the
// mount has no extended attributes, and later ones on any file do not.
// Writes of xattrs are still refused with EROFS.
func TestNoXattrsAnsweredByTheKernel(t *testing.T) {
	t.Parallel()
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

// TestParallelListingMatchesOneStream lists a bucket whose names sort
// around the '/' separator ("a-b/", "a.c", "a./", "a/") serially and in
// parallel runs, and checks both against rclone's listing; the parallel
// listing sends one request for the top and one per run, however many
// directories there are.
func TestParallelListingMatchesOneStream(t *testing.T) {
	t.Parallel()
	const bucket = "meta-list"
	content := map[string][]byte{}
	for _, key := range []string{"a.c", "a-b.txt", "zz-top", "a/x", "a-b/y", "a./z", "a/deeper/w", "wrap/train/only"} {
		content["flat/"+key] = []byte(key)
	}
	for d := range 40 {
		for f := range 3 {
			key := fmt.Sprintf("flat/d%02d/s%d.tar", d, f)
			content[key] = []byte(key)
			wrapped := fmt.Sprintf("wrap/train/d%02d/s%d.tar", d, f)
			content[wrapped] = []byte(wrapped)
		}
	}
	newBucket(t, bucket, content)
	for _, prefix := range []string{"flat", "wrap"} {
		var want []string
		for key, data := range content {
			if rest, ok := strings.CutPrefix(key, prefix+"/"); ok {
				want = append(want, fmt.Sprintf("%d\t%s", len(data), rest))
			}
		}
		source := "s3://" + bucket + "/" + prefix
		for _, streams := range []string{"1", "4", "64"} {
			r := mustRun(t, e2e.env(), 2*time.Minute, "ls", source, "--list-streams", streams, "--endpoint-url", e2e.minio.url)
			got := parseLs(t, r.stdout)
			assertSameList(t, "shardfs ls "+source+" --list-streams "+streams, got, want)
			if len(got) != len(want) {
				t.Errorf("shardfs ls %s --list-streams %s: %d lines for %d objects", source, streams, len(got), len(want))
			}
		}
	}
	// At a bucket's root, objects that sort after the last directory
	// are listed once, not once by the top and again by the last run.
	const rootBucket = "meta-list-root"
	rootContent := map[string][]byte{}
	for _, key := range []string{"a.tar", "d00/x.tar", "d01/y.tar", "large/big.tar", "shard-0.tar", "shard-1.tar", "zz"} {
		rootContent[key] = []byte(key)
	}
	newBucket(t, rootBucket, rootContent)
	var rootWant []string
	for key, data := range rootContent {
		rootWant = append(rootWant, fmt.Sprintf("%d\t%s", len(data), key))
	}
	for _, streams := range []string{"1", "4"} {
		r := mustRun(t, e2e.env(), 2*time.Minute, "ls", "s3://"+rootBucket, "--list-streams", streams, "--endpoint-url", e2e.minio.url)
		got := parseLs(t, r.stdout)
		assertSameList(t, "shardfs ls s3://"+rootBucket+" --list-streams "+streams, got, rootWant)
		if len(got) != len(rootWant) {
			t.Errorf("shardfs ls s3://%s --list-streams %s: %d lines for %d objects", rootBucket, streams, len(got), len(rootWant))
		}
	}
	// 48 directories under flat/ in 4 runs: the top page and 4 run pages.
	m := mountWith(t, e2e.env(), e2e.minio.url, "s3://"+bucket+"/flat", "--list-streams", "4")
	st := mountStats(t, m.dir)
	if st["store_list_requests_total"] != 5 {
		t.Errorf("parallel listing sent %v LIST requests, want 5 (the top, then 4 runs)", st["store_list_requests_total"])
	}
	// wrap/ holds only train/: the listing walks into it before splitting.
	m = mountWith(t, e2e.env(), e2e.minio.url, "s3://"+bucket+"/wrap", "--list-streams", "4")
	st = mountStats(t, m.dir)
	if st["store_list_requests_total"] != 6 {
		t.Errorf("listing wrap/ sent %v LIST requests, want 6 (wrap/, wrap/train/, then 4 runs)", st["store_list_requests_total"])
	}
}
