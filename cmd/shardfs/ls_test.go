package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// ls and manifest list a local source as a mount would: ls a line of size
// and key per object, manifest the JSON lines a mount reads back whole.
func TestLsAndManifestListTheSource(t *testing.T) {
	dir := t.TempDir()
	want := map[string]int{"a.tar": 3, "sub/b.tar": 70, "sub/deeper/c.idx": 0}
	for key, n := range want {
		p := filepath.Join(dir, key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(cmd string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errOut
		if err := app.Run([]string{"shardfs", cmd, dir}); err != nil {
			t.Fatalf("shardfs %s: %v\n%s", cmd, err, errOut.String())
		}
		return out.String()
	}

	ls := strings.Split(strings.TrimSuffix(run("ls"), "\n"), "\n")
	if len(ls) != len(want) {
		t.Fatalf("ls printed %d lines, want %d:\n%s", len(ls), len(want), strings.Join(ls, "\n"))
	}
	for _, line := range ls {
		var size int
		var key string
		if _, err := fmt.Sscanf(line, "%d\t%s", &size, &key); err != nil || want[key] != size {
			t.Errorf("ls line %q: want SIZE<tab>KEY of a file of the source", line)
		}
	}

	objs, err := store.ReadManifest(strings.NewReader(run("manifest")))
	if err != nil {
		t.Fatalf("manifest does not read back: %v", err)
	}
	if len(objs) != len(want) {
		t.Fatalf("manifest holds %d objects, want %d", len(objs), len(want))
	}
	for _, o := range objs {
		if n, ok := want[o.Key]; !ok || int64(n) != o.Size || o.ETag == "" {
			t.Errorf("manifest object %+v: want a file of the source with its size and an ETag", o)
		}
	}
}
