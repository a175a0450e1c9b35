package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

func TestSecondOpenOfADirIsLocked(t *testing.T) {
	dir := t.TempDir()
	cfg := ringConfig(dir, 8)
	c := openCache(t, cfg)
	o := newTestObject("l.tar", testBlock)
	o.putAll(c, 1)

	_, err := Open(context.Background(), cfg, nil)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Open = %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	if _, err := VerifyDir(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("VerifyDir of an owned dir = %v, want ErrLocked", err)
	}
	if err := ClearDir(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("ClearDir of an owned dir = %v, want ErrLocked", err)
	}
	ds, err := InspectDir(dir)
	if err != nil {
		t.Fatalf("InspectDir of an owned dir: %v", err)
	}
	if ds.OwnerPID != os.Getpid() || ds.UsedSlots != 1 {
		t.Fatalf("InspectDir = %+v, want owner %d and 1 used slot", ds, os.Getpid())
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCache(t, cfg)
	mustRead(t, c, o, 0, testBlock)
}

// A cache asked for a disk tier never runs quietly without one: a dir it
// cannot use fails Open with one line, and leaves nothing behind.
func TestUnusableDirFailsOpen(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Config{
		"unwritable": {Dir: filepath.Join(notADir, "cache"), Size: ringSizeFor(8), SizeGiven: true},
		// More than any test disk holds: the ring must not half-allocate.
		"disk full": {Dir: t.TempDir(), Size: 1 << 60, SizeGiven: true},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			cfg.BlockSize, cfg.MemorySize = testBlock, 8<<20
			c, err := Open(context.Background(), cfg, nil)
			if err == nil {
				c.Close()
				t.Fatal("Open of an unusable dir succeeded")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			if size, _ := dirBytesIfAny(cfg.Dir); size > 4096 {
				t.Fatalf("an unusable dir was left holding %d bytes", size)
			}
		})
	}
}

func dirBytesIfAny(dir string) (int64, error) {
	var total int64
	entries, err := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			total += fi.Size()
		}
	}
	return total, err
}

func TestRingFailureMidRunWarnsOnceAndKeepsServing(t *testing.T) {
	var logs cachetest.LogRecorder
	cfg := ringConfig(t.TempDir(), 16)
	cfg.MemorySize = 8 << 20
	c, err := Open(context.Background(), cfg, logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A file opened read-only stands in for a disk that stopped taking writes.
	ro, err := openRingFile(c.ring.file.path, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	c.ring.file.close()
	c.ring.file = ro
	for i := range 5 {
		newTestObject(fmt.Sprintf("f/%d.tar", i), testBlock).putAll(c, 1)
	}
	if n := logs.Count("WARN"); n != 1 || c.Stats().RingEnabled {
		t.Fatalf("after failed writes: %d warnings, ring enabled=%v:\n%s", n, c.Stats().RingEnabled, logs.String())
	}
	c.ram.cache.Wait()
	mustRead(t, c, newTestObject("f/4.tar", testBlock), 0, testBlock)
}

func TestOfflineTools(t *testing.T) {
	dir := t.TempDir()
	if ds, err := InspectDir(dir); err != nil || ds.RingFile != "" {
		t.Fatalf("InspectDir of an empty dir = %+v, %v", ds, err)
	}
	if _, err := InspectDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("InspectDir of a missing dir succeeded")
	}
	cfg := ringConfig(dir, 16)
	c := openCache(t, cfg)
	objs := manyObjects("tools", 4) // 1, 100, 1 block, 1 block + 1 bytes
	for _, o := range objs {
		o.putAll(c, 2)
	}
	c.Close()

	ds, err := InspectDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := int64(1 + 100 + testBlock + testBlock + 1)
	if ds.OwnerPID != 0 || ds.Slots != 16 || ds.UsedSlots != 5 || ds.UsedBytes != wantBytes ||
		ds.Versions != 4 || ds.BlockSize != testBlock || ds.FileBytes > cfg.Size {
		t.Fatalf("InspectDir = %+v, want 16 slots, 5 used, %d bytes, 4 versions", ds, wantBytes)
	}
	rep, err := VerifyDir(dir)
	if err != nil || len(rep.Bad) != 0 || rep.Good != 5 {
		t.Fatalf("VerifyDir = %+v, %v; want 5 good slots", rep, err)
	}

	for _, sub := range []string{"listings", "indexes"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, "a.jsonl"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClearDir(dir, "listings", "indexes"); err != nil {
		t.Fatalf("ClearDir: %v", err)
	}
	if ds, _ := InspectDir(dir); ds.UsedSlots != 0 {
		t.Fatalf("after ClearDir: %+v", ds)
	}
	for _, sub := range []string{"listings", "indexes"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after ClearDir, %s: %v; want it gone", sub, err)
		}
	}
	c = openCache(t, cfg)
	for _, o := range objs {
		mustMiss(t, c, o, 0, 1)
	}
}
