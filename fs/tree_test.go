package fs

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/shardfs/shardfs/store"
)

func TestBuildTree(t *testing.T) {
	objs := []store.Object{
		{Key: "z.tar"}, {Key: "a/b.tar"}, {Key: "a"}, {Key: "a/c/d.tar"},
		{Key: "bad//x"}, {Key: "./y"}, {Key: "sp ace/ü.tar"}, {Key: ".shardfs/stats"},
		{Key: "a-b/x"}, {Key: "a.c"},
	}
	for _, order := range [][]store.Object{objs, reverse(objs)} {
		tr, skipped := buildTree(order)
		var gotSkipped []string
		for _, s := range skipped {
			gotSkipped = append(gotSkipped, s.Key)
		}
		if want := []string{"./y", ".shardfs/stats", "a", "bad//x"}; !slices.Equal(gotSkipped, want) {
			t.Errorf("skipped %v, want %v", gotSkipped, want)
		}
		if e, ok := tr.find("a"); !ok || !e.isDir() {
			t.Errorf("a should be the directory a/, shadowing the object a")
		}
		for _, key := range []string{"a/c/d.tar", "sp ace/ü.tar", "z.tar", "a-b/x", "a.c", "a/b.tar"} {
			if o, ok := tr.object(key); !ok || o.Key != key {
				t.Errorf("%s missing (got %q, %v)", key, o.Key, ok)
			}
		}
		for _, path := range []string{"a/c", "a/c/d.tar/x", "nope", "a/nope", "z.tar/x"} {
			if _, ok := tr.object(path); ok {
				t.Errorf("%s found, want not an object", path)
			}
		}
		var names []string
		for _, e := range tr.dirs[0].entries {
			names = append(names, e.name)
		}
		if want := []string{"a", "a-b", "a.c", "sp ace", "z.tar"}; !slices.Equal(names, want) {
			t.Errorf("root lists %v, want %v (sorted, once each)", names, want)
		}
	}
}

func TestInodeNumbersStable(t *testing.T) {
	tr, _ := buildTree([]store.Object{{Key: "a/b", ETag: "1"}, {Key: "a/c", ETag: "1"}, {Key: "b", ETag: "1"}})
	again, _ := buildTree([]store.Object{{Key: "a/b", ETag: "1"}, {Key: "a/c", ETag: "2"}, {Key: "b/x", ETag: "1"}})
	ino := func(t *tree, path string) uint64 {
		e, _ := t.find(path)
		return t.inode(e)
	}
	if ino(tr, "a/b") != ino(again, "a/b") || ino(tr, "a/b") == ino(tr, "a/c") {
		t.Fatal("inode numbers must be a stable function of the path and version")
	}
	if ino(tr, "a/c") == ino(again, "a/c") {
		t.Fatal("a new version of an object must be a new inode")
	}
	if ino(tr, "b") == ino(again, "b") {
		t.Fatal("an object and a directory of one path must not share an inode")
	}
	if inodeNumber("", "/") < 1024 {
		t.Fatal("inode numbers must avoid the reserved range")
	}
}

func TestUpdateCountsChanges(t *testing.T) {
	before := []store.Object{
		{Key: "keep", ETag: "1"}, {Key: "gone", ETag: "1"}, {Key: "d/x", ETag: "1"},
		{Key: "d/y", ETag: "1"}, {Key: "turns", ETag: "1"}, {Key: "old/a", ETag: "1"}, {Key: "old/b", ETag: "1"},
	}
	after := []store.Object{
		{Key: "keep", ETag: "1"}, {Key: "new", ETag: "1"}, {Key: "d/x", ETag: "2"},
		{Key: "d/y", ETag: "1"}, {Key: "d/z", ETag: "1"}, {Key: "turns/inner", ETag: "1"},
	}
	r, err := New(Options{Store: &store.Local{}, Objects: before, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Update(after)
	want := Changes{Added: 3, Removed: 4, Changed: 1} // new, d/z, turns/inner; gone, turns, old/a, old/b; d/x
	if got != want {
		t.Errorf("Update found %+v, want %+v", got, want)
	}
	if o, ok := r.Object("d/x"); !ok || o.ETag != "2" {
		t.Errorf("d/x after the update: %+v %v, want etag 2", o, ok)
	}
	if _, ok := r.Object("gone"); ok {
		t.Error("a removed key is still found")
	}
}

// BenchmarkBuildTree is the work of mounting a listing of a million keys
// spread over a thousand directories.
func BenchmarkBuildTree(b *testing.B) {
	objs := make([]store.Object, 1_000_000)
	for i := range objs {
		objs[i] = store.Object{Key: fmt.Sprintf("train/part-%04d/shard-%07d.tar", i/1000, i), ETag: "x"}
	}
	b.ResetTimer()
	for range b.N {
		buildTree(objs)
	}
}

func reverse(in []store.Object) []store.Object {
	out := make([]store.Object, len(in))
	for i, o := range in {
		out[len(in)-1-i] = o
	}
	return out
}

// A bucket key named like the side directory, or under it, never replaces
// it: the key is reported, and the side files stay.
func TestKeysUnderTheSideDirectoryAreShadowed(t *testing.T) {
	objs := []store.Object{{Key: SideDir}, {Key: SideDir + "/ctl"}, {Key: SideDir + "/x/y.tar"}, {Key: "a.tar"}, {Key: "x/" + SideDir}}
	tr, skipped := buildTree(objs)
	var got []string
	for _, s := range skipped {
		got = append(got, s.Key)
	}
	if want := []string{SideDir, SideDir + "/ctl", SideDir + "/x/y.tar"}; !slices.Equal(got, want) {
		t.Fatalf("skipped %v, want %v", got, want)
	}
	if _, ok := tr.find(SideDir); ok {
		t.Fatal("the tree has an entry where the side directory goes")
	}
	if _, ok := tr.object("x/" + SideDir); !ok {
		t.Fatal("a key named like the side directory below the root is a plain file")
	}
}
