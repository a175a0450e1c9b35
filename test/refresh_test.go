//go:build e2e

package test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// refreshTimeout bounds the wait for a background refresh on a busy box.
const refreshTimeout = time.Minute

// waitStat polls the mount's stats until name reaches at least want.
func waitStat(t *testing.T, mnt, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(refreshTimeout)
	for {
		got := mountStats(t, mnt)[name]
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %v for %v, want %v", name, got, refreshTimeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMetadataTTLRefresh adds, deletes and overwrites objects under a
// mount with --metadata-ttl: after the refresh the tree shows the change,
// a handle opened before the overwrite never reads bytes of the new
// version (EIO once its own are gone), and a refresh while the store is
// unreachable keeps the tree as it was.
func TestMetadataTTLRefresh(t *testing.T) {
	t.Parallel()
	const bucket = "meta-ttl"
	const big = 32 << 20
	before := randomBytes(t, big)
	newBucket(t, bucket, map[string][]byte{"keep.bin": []byte("keep"), "gone.bin": []byte("gone"), "over.bin": before})
	tp := startToxiproxy(t)
	proxy := tp.proxy(t, "meta-ttl", e2e.minio.url)
	m := mountWith(t, e2e.env(), proxy.url, "s3://"+bucket, "--metadata-ttl", "2s", "--cache-dir", t.TempDir(),
		"--retry-timeout", "1s", "--memory-cache-size", "0", "--max-prefetch", "2MiB", "--part-size", "1MiB",
		"--read-ahead-kb", "0", "--prefetch-next", "0")
	if got := listDir(t, m.dir); !slices.Equal(got, []string{"gone.bin", "keep.bin", "over.bin"}) {
		t.Fatalf("mount lists %v", got)
	}

	old, err := os.Open(m.path("over.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	head := make([]byte, 1<<20)
	if _, err := old.ReadAt(head, 0); err != nil || !bytes.Equal(head, before[:len(head)]) {
		t.Fatalf("first MiB of over.bin before the overwrite: %v", err)
	}

	after := randomBytes(t, big)
	if err := e2e.putObject(bucket, "over.bin", after); err != nil {
		t.Fatal(err)
	}
	if err := e2e.putObject(bucket, "new.bin", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := e2e.rclone("deletefile", ":s3:"+bucket+"/gone.bin"); err != nil {
		t.Fatal(err)
	}
	waitStat(t, m.dir, "metadata_changed_total", 1)
	waitStat(t, m.dir, "metadata_removed_total", 1)
	waitStat(t, m.dir, "metadata_added_total", 1)

	// Opened before anything lists the directory: the name itself must
	// lead to the new version.
	if got, err := os.ReadFile(m.path("over.bin")); err != nil || !bytes.Equal(got, after) {
		t.Errorf("a new open of over.bin after the refresh does not read the new version (err %v)", err)
	}
	if got := listDir(t, m.dir); !slices.Equal(got, []string{"keep.bin", "new.bin", "over.bin"}) {
		t.Errorf("after the refresh the mount lists %v, want keep.bin new.bin over.bin", got)
	}
	if _, err := os.Stat(m.path("gone.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of a deleted object after the refresh: %v, want ENOENT", err)
	}
	if got, err := os.ReadFile(m.path("keep.bin")); err != nil || string(got) != "keep" {
		t.Errorf("keep.bin after the refresh: %q, %v", got, err)
	}
	if got, err := os.ReadFile(m.path("new.bin")); err != nil || string(got) != "new" {
		t.Errorf("new.bin after the refresh: %q, %v", got, err)
	}
	// The handle opened before: its own version's bytes, or EIO; never
	// the new version's. Its later ranges were never fetched, so EIO.
	buf := make([]byte, 1<<20)
	sawEIO := false
	for _, off := range []int64{16 << 20, 24 << 20, 31 << 20} {
		n, err := old.ReadAt(buf, off)
		switch {
		case errors.Is(err, syscall.EIO):
			sawEIO = true
		case err != nil:
			t.Errorf("old handle at %d: %v, want its version's bytes or EIO", off, err)
		case !bytes.Equal(buf[:n], before[off:off+int64(n)]):
			t.Fatalf("old handle at %d read bytes that are not its version's", off)
		}
	}
	if !sawEIO {
		t.Error("the handle opened before the overwrite read ranges it never fetched without EIO")
	}

	// The store goes away: refreshes fail, the tree stays.
	refreshes := mountStats(t, m.dir)["metadata_refreshes_total"]
	tp.mustCall(t, http.MethodPost, "/proxies/meta-ttl", map[string]any{"enabled": false}, nil)
	if err := e2e.putObject(bucket, "during-outage.bin", []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitStat(t, m.dir, "metadata_refresh_failures_total", 1)
	if got := listDir(t, m.dir); !slices.Equal(got, []string{"keep.bin", "new.bin", "over.bin"}) {
		t.Errorf("during the outage the mount lists %v, want the tree as it was", got)
	}
	if got, err := os.ReadFile(m.path("keep.bin")); err != nil || string(got) != "keep" {
		t.Errorf("keep.bin, read before, during the outage: %q, %v", got, err)
	}
	tp.mustCall(t, http.MethodPost, "/proxies/meta-ttl", map[string]any{"enabled": true}, nil)
	waitStat(t, m.dir, "metadata_refreshes_total", refreshes+1)
	waitStat(t, m.dir, "metadata_added_total", 2)
	if _, err := os.Stat(m.path("during-outage.bin")); err != nil {
		t.Errorf("an object added during the outage is missing after the store came back: %v", err)
	}
}

// TestRemountUsesPersistedListing: a second mount of the same source on
// the same cache dir sends no LIST; once the listing is older than
// --metadata-ttl a mount lists again.
func TestRemountUsesPersistedListing(t *testing.T) {
	t.Parallel()
	cacheDir := t.TempDir()
	flags := []string{"--cache-dir", cacheDir}
	first := mountWith(t, e2e.env(), e2e.minio.url, e2e.source(), flags...)
	st := mountStats(t, first.dir)
	if st["metadata_mount_list_requests"] < 1 || st["metadata_from_cache"] != 0 {
		t.Fatalf("first mount: %v LIST requests, from cache %v; want a LIST", st["metadata_mount_list_requests"], st["metadata_from_cache"])
	}
	first.stop(t)

	second := mountWith(t, e2e.env(), e2e.minio.url, e2e.source(), flags...)
	st = mountStats(t, second.dir)
	if st["store_list_requests_total"] != 0 || st["store_lists_total"] != 0 || st["metadata_from_cache"] != 1 {
		t.Errorf("remount: %v LIST requests, from cache %v; want none, from the cache dir", st["store_list_requests_total"], st["metadata_from_cache"])
	}
	checkShards(t, second.dir, e2e.objects)
	second.stop(t)

	// The same cache dir with another source keeps its own listing.
	other := mountWith(t, e2e.env(), e2e.minio.url, strings.TrimSuffix(e2e.source(), "/")+"/nested", flags...)
	if st := mountStats(t, other.dir); st["metadata_from_cache"] != 0 {
		t.Errorf("a mount of another source took the cached listing of %s", e2e.source())
	}
	if _, err := os.Stat(filepath.Join(other.dir, "deeper")); err != nil {
		t.Errorf("mount of the nested prefix: %v", err)
	}
	other.stop(t)

	time.Sleep(1100 * time.Millisecond)
	stale := mountWith(t, e2e.env(), e2e.minio.url, e2e.source(), append(flags, "--metadata-ttl", "1s")...)
	if st := mountStats(t, stale.dir); st["metadata_from_cache"] != 0 || st["metadata_mount_list_requests"] < 1 {
		t.Errorf("a listing older than --metadata-ttl was used for the mount")
	}
}
