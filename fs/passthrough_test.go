package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// wholeSet is a WholeFiles holding the files named in held.
type wholeSet struct {
	dir  string
	held map[string]bool
}

func (w *wholeSet) OpenWholeFile(obj store.Object) (*os.File, bool) {
	if !w.held[obj.Key] {
		return nil, false
	}
	f, err := os.Open(filepath.Join(w.dir, "f"))
	return f, err == nil
}

func (w *wholeSet) HasWholeFile(obj store.Object) bool { return w.held[obj.Key] }

func (w *wholeSet) WholeFilesDir() string { return w.dir }

// An inode keeps the mode of its first open until its last is released:
// the kernel refuses a cached open beside a passed-through one.
func TestOpenModeKeepsAnInodesMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	whole := &wholeSet{dir: dir, held: map[string]bool{"a.tar": true}}
	m := &mountState{opts: Options{WholeFiles: whole}}
	m.passthrough.Store(true)
	node := &fileNode{m: m, obj: store.Object{Key: "a.tar", Size: 1}}
	open := func(want openMode, wantBacking bool, why string) {
		t.Helper()
		mode, backing := node.openMode()
		if backing != nil {
			backing.Close()
		}
		if mode != want || (backing != nil) != wantBacking {
			t.Fatalf("%s: mode %d, backing %v; want mode %d, backing %v", why, mode, backing != nil, want, wantBacking)
		}
	}

	open(passedThrough, true, "held whole")
	whole.held["a.tar"] = false // evicted
	open(passedThrough, false, "beside a passed-through open, after eviction")
	node.released()
	node.released()
	open(viaDaemon, false, "not held, nothing open")
	whole.held["a.tar"] = true
	open(viaDaemon, false, "held again, beside an open served by the daemon")
	node.released()
	node.released()
	open(passedThrough, true, "held, nothing open")
	node.released()

	m.passthrough.Store(false) // refused by the probe, or --passthrough off
	open(viaDaemon, false, "passthrough off")
}
