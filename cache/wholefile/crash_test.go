package wholefile

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
	crashObjSize   = 4 << 20
	crashQuota     = 3*crashObjSize - 1 // two files, and a third evicts one
	crashObjects   = 1000
	crashKillAfter = 2 // files made before the parent starts watching
)

// The child side of TestWholeFileTornByKill9IsNeverUsed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("SHARDFS_WHOLE_CRASH_CHILD"); dir != "" {
		wholeCrashChild(dir, os.Getenv("SHARDFS_WHOLE_CRASH_ROUND"))
	}
	os.Exit(m.Run())
}

// crashShard is the i-th shard a child of round makes whole.
func crashShard(round string, i int) testShard { return newTestShard(crashKey(round, i), crashObjSize) }

func crashKey(round string, i int) string { return fmt.Sprintf("r%s-w%04d.bin", round, i) }

// wholeCrashChild makes whole-shard files, one after another, until killed.
func wholeCrashChild(dir, round string) {
	w, err := Open(dir, crashQuota, nil)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	for i := range crashObjects {
		o := crashShard(round, i)
		if ok, err := w.Make(context.Background(), o.s, o.read); !ok || err != nil {
			fmt.Fprintf(os.Stderr, "Make(%s) = %v, %v\n", o.s.Key, ok, err)
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
		if err == nil && filepath.Dir(target) == wholeDir(dir) && filepath.Base(target) != JournalName {
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

		w, err := Open(dir, crashQuota, nil)
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for i := range crashObjects {
			s := shardOf(crashKey(r, i), crashObjSize) // its bytes are made only when held
			if !w.Has(s) {
				continue
			}
			o := crashShard(r, i)
			if Name(s.ID) == tornName {
				// Finished between the sighting and the kill: then
				// it must be whole, as every file used must.
				t.Logf("round %d: %s, being written at the kill, is in use after restart: it must hold its whole shard", round, torn)
			}
			mustReadWhole(t, w, o)
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
		w.Close()
	}
}
