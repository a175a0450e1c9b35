package fs

import (
	"reflect"
	"testing"

	"github.com/shardfs/shardfs/store"
)

func TestBuildTree(t *testing.T) {
	objs := []store.Object{
		{Key: "z.tar"}, {Key: "a/b.tar"}, {Key: "a"}, {Key: "a/c/d.tar"},
		{Key: "bad//x"}, {Key: "./y"}, {Key: "sp ace/ü.tar"},
	}
	for _, order := range [][]store.Object{objs, reverse(objs)} {
		root, skipped := buildTree(order)
		var gotSkipped []string
		for _, s := range skipped {
			gotSkipped = append(gotSkipped, s.Key)
		}
		if want := []string{"./y", "bad//x", "a"}; !sameSet(gotSkipped, want) {
			t.Errorf("skipped %v, want %v", gotSkipped, want)
		}
		if _, ok := root.files["a"]; ok {
			t.Errorf("file a should be shadowed by directory a/")
		}
		if _, ok := root.dirs["a"].dirs["c"].files["d.tar"]; !ok {
			t.Errorf("a/c/d.tar missing")
		}
		if _, ok := root.dirs["sp ace"].files["ü.tar"]; !ok {
			t.Errorf("key with space and non-ASCII missing")
		}
		if _, ok := root.files["z.tar"]; !ok {
			t.Errorf("z.tar missing")
		}
	}
}

func TestInodeNumbersStable(t *testing.T) {
	if inodeNumber("a/b") != inodeNumber("a/b") || inodeNumber("a/b") == inodeNumber("a/c") {
		t.Fatal("inode numbers must be a stable function of the path")
	}
	if inodeNumber("") < 1024 {
		t.Fatal("inode numbers must avoid the reserved range")
	}
}

func reverse(in []store.Object) []store.Object {
	out := make([]store.Object, len(in))
	for i, o := range in {
		out[len(in)-1-i] = o
	}
	return out
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return reflect.DeepEqual(len(a), len(b))
}

// A bucket key named like the side directory, or under it, never replaces
// it: the key is reported, and the side files stay.
func TestKeysUnderTheSideDirectoryAreShadowed(t *testing.T) {
	objs := []store.Object{{Key: SideDir}, {Key: SideDir + "/ctl"}, {Key: SideDir + "/x/y.tar"}, {Key: "a.tar"}, {Key: "x/" + SideDir}}
	root, skipped := buildTree(objs)
	var got []string
	for _, s := range skipped {
		got = append(got, s.Key)
	}
	if want := []string{SideDir, SideDir + "/ctl", SideDir + "/x/y.tar"}; !sameSet(got, want) {
		t.Fatalf("skipped %v, want %v", got, want)
	}
	if _, ok := root.dirs[SideDir]; ok {
		t.Fatal("the tree has a directory where the side directory goes")
	}
	if _, ok := root.files[SideDir]; ok {
		t.Fatal("the tree has a file where the side directory goes")
	}
	if _, ok := root.dirs["x"].files[SideDir]; !ok {
		t.Fatal("a key named like the side directory below the root is a plain file")
	}
}
