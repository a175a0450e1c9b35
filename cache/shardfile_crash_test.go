package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

const (
	crashSlots     = 700 // two crash objects, and some
	crashObjSize   = 4 << 20
	crashObjects   = 1000
	crashKillAfter = 2 // files made before the parent starts watching
)

// crashObject is the i-th shard a child of round makes whole; its ETag is
// its key, so crashName finds its file without making its bytes.
func crashObject(round string, i int) testObject {
	o := newTestObject(crashKey(round, i), crashObjSize)
	o.obj.ETag = o.obj.Key
	return o
}

func crashKey(round string, i int) string { return fmt.Sprintf("r%s-w%04d.bin", round, i) }

func crashName(cfg Config, round string, i int) string {
	return wholeName(versionOf(cfg.Namespace, crashKey(round, i), crashKey(round, i)))
}

// wholeCrashChild makes whole-shard files, one after another, until killed.
func wholeCrashChild(dir, round string) {
	c, err := Open(context.Background(), wholeConfig(dir, crashSlots), nil)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	for i := range crashObjects {
		o := crashObject(round, i)
		o.putAll(c, 64)
		if ok, err := c.MakeWholeFile(context.Background(), o.obj); !ok || err != nil {
			fmt.Fprintf(os.Stderr, "MakeWholeFile(%s) = %v, %v\n", o.obj.Key, ok, err)
			os.Exit(2)
		}
		if i+1 == crashKillAfter {
			os.Stdout.WriteString("ready\n")
		}
	}
	os.Exit(3) // never killed
}

// fileBeingWritten returns the name of a file in the shards dir that pid
// holds open, other than the journal: a whole-shard file being written.
func fileBeingWritten(pid int, dir string) string {
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	entries, _ := os.ReadDir(fds)
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fds, e.Name()))
		if err == nil && filepath.Dir(target) == wholeDir(dir) && filepath.Base(target) != journalName {
			return filepath.Base(target)
		}
	}
	return ""
}

// kill -9 while a whole-shard file is being written: after a restart that
// file is never used, nothing of it is left, and every file that is used
// holds its shard's bytes.
func TestWholeFileTornByKill9IsNeverUsed(t *testing.T) {
	dir := t.TempDir()
	for round := range 3 {
		r := fmt.Sprint(round)
		child := cachetest.StartChild(t, "SHARDFS_WHOLE_CRASH_CHILD="+dir, "SHARDFS_WHOLE_CRASH_ROUND="+r)
		torn := ""
		for deadline := time.Now().Add(20 * time.Second); torn == "" && time.Now().Before(deadline); {
			torn = fileBeingWritten(child.Process.Pid, dir)
		}
		child.Process.Signal(syscall.SIGKILL)
		child.Wait()
		if torn == "" {
			t.Fatal("never saw a whole-shard file being written")
		}
		tornName := strings.TrimRight(strings.TrimPrefix(torn, "."), "0123456789")

		cfg := wholeConfig(dir, crashSlots)
		c, err := Open(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for i := range crashObjects {
			name := crashName(cfg, r, i)
			if !c.whole.has(name) {
				continue
			}
			o := crashObject(r, i)
			if name == tornName {
				// Finished between the sighting and the kill: then
				// it must be whole, as every file used must.
				t.Logf("round %d: %s, being written at the kill, is in use after restart: it must hold its whole shard", round, torn)
			}
			mustReadWhole(t, c, o)
			used++
		}
		for _, n := range wholeEntries(t, dir) {
			if strings.HasSuffix(n, tmpSuffix) || atomicfile.IsTemp(n) {
				t.Errorf("round %d: %s left behind after restart", round, n)
			}
		}
		t.Logf("round %d: killed while %s was being written; %d whole files in use after restart, each with its shard's bytes", round, torn, used)
		if used == 0 {
			t.Errorf("round %d: no whole file survived the restart (%d were made before the kill)", round, crashKillAfter)
		}
		c.Close()
	}
}
