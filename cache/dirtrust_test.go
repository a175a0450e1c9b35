package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

// A new cache dir and its files are the user's alone; files an older
// release left readable by others are made private.
func TestCacheDirAndFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, ringConfig(dir, 8))
	c.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	for _, name := range []string{ringFileName, cachedir.LockName} {
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v (%v), want 0600", name, fi.Mode().Perm(), err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c = openCache(t, ringConfig(dir, 8))
	c.Close()
	for _, name := range []string{ringFileName, cachedir.LockName} {
		if fi, _ := os.Stat(filepath.Join(dir, name)); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s left at %v, want 0600", name, fi.Mode().Perm())
		}
	}
}

// A cache dir is refused, in one line, when another user could have
// planted or could read what is in it; a planted link is never truncated
// or written through.
func TestUntrustedCacheDirsAreRefused(t *testing.T) {
	victimContent := []byte("not a cache ring; must survive\n")
	cases := map[string]func(t *testing.T, dir string) (victim string){
		"group-writable dir": func(t *testing.T, dir string) string {
			must(t, os.Chmod(dir, 0o770))
			return ""
		},
		"world-writable dir": func(t *testing.T, dir string) string {
			must(t, os.Chmod(dir, 0o777))
			return ""
		},
		"symlinked ring": func(t *testing.T, dir string) string {
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, victimContent, 0o600))
			must(t, os.Symlink(victim, filepath.Join(dir, ringFileName)))
			return victim
		},
		"symlinked lock": func(t *testing.T, dir string) string {
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, victimContent, 0o600))
			must(t, os.Symlink(victim, filepath.Join(dir, cachedir.LockName)))
			return victim
		},
		"hard-linked ring": func(t *testing.T, dir string) string {
			victim := filepath.Join(dir, "victim")
			must(t, os.WriteFile(victim, victimContent, 0o600))
			must(t, os.Link(victim, filepath.Join(dir, ringFileName)))
			return victim
		},
		"dir of another user": func(t *testing.T, dir string) string {
			if os.Geteuid() != 0 {
				t.Skip("chown to another user needs root (CI runs the tests as root)")
			}
			must(t, os.Chown(dir, 4242, 4242))
			return ""
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cache")
			must(t, os.Mkdir(dir, 0o700))
			victim := plant(t, dir)
			cfg := ringConfig(dir, 8)
			cfg.SizeGiven = true
			c, err := Open(context.Background(), cfg, nil)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "refus") {
				t.Fatalf("error %q, want one line saying it refuses", err)
			}
			t.Log(err)
			if victim != "" {
				if got, err := os.ReadFile(victim); err != nil || string(got) != string(victimContent) {
					t.Fatalf("the link's target was changed: %q, %v", got, err)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// With no size asked for, a new ring on a filesystem that cannot hold the
// default is made to fit, with a warning that says so; asked for
// explicitly, a size that does not fit fails Open.
func TestARingWithNoSizeAskedForFitsItsFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs the tests as root)")
	}
	dir := t.TempDir()
	must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m,mode=0700"))
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })

	cfg := Config{Dir: dir, Size: DefaultSize, BlockSize: testBlock, Namespace: "mem://test"}
	cfg.SizeGiven = true
	if c, err := Open(context.Background(), cfg, nil); err == nil {
		c.Close()
		t.Fatal("a 10 GiB ring asked for on a 4 MiB filesystem was opened")
	} else {
		t.Log(err)
	}
	cfg.SizeGiven = false
	var logs cachetest.LogRecorder
	c, err := Open(context.Background(), cfg, logs.Logger())
	if err != nil {
		t.Fatalf("Open with the default size: %v", err)
	}
	defer c.Close()
	st := c.Stats()
	if !st.RingEnabled || st.RingSlots < minSlots || geometryFor(0, testBlock).fileSize()+st.RingSlots*(int64(headerSize)+testBlock) > 4<<20 {
		t.Fatalf("ring %+v, want one that fits 4 MiB", st)
	}
	if !strings.Contains(logs.String(), "made smaller than the default") {
		t.Fatalf("no warning about the size chosen:\n%s", logs.String())
	}
	o := newTestObject("fit.tar", 4*testBlock)
	o.putAll(c, 4)
	mustRead(t, c, o, 0, o.obj.Size)
}
