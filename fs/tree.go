package fs

import (
	"hash/fnv"
	"sort"
	"strings"

	"github.com/shardfs/shardfs/store"
)

// treeDir is one directory of the listing, before it becomes inodes.
type treeDir struct {
	dirs  map[string]*treeDir
	files map[string]store.Object
}

// shadowed is a key that cannot appear in the tree, and why.
type shadowed struct {
	Key    string
	Reason string
}

func newTreeDir() *treeDir {
	return &treeDir{dirs: map[string]*treeDir{}, files: map[string]store.Object{}}
}

// buildTree turns a listing into a directory tree. Rules, applied so the
// result does not depend on listing order:
//   - "/" separates directories; empty, "." and ".." components make a key
//     unrepresentable and it is skipped.
//   - A key that is, or lies under, the side directory (SideDir) is
//     shadowed by it.
//   - When "a" is an object and also a directory (because "a/b" exists),
//     the directory wins and the object "a" is shadowed, as mountpoint-s3
//     does. Shadowed keys are reported so the caller can log them.
func buildTree(objs []store.Object) (*treeDir, []shadowed) {
	root := newTreeDir()
	var skipped []shadowed
	sorted := append([]store.Object(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	for _, o := range sorted {
		parts := strings.Split(o.Key, "/")
		if !validComponents(parts) {
			skipped = append(skipped, shadowed{o.Key, "key has an empty, '.' or '..' path component"})
			continue
		}
		if parts[0] == SideDir {
			// The side directory wins, as a directory wins over an object
			// of the same name.
			skipped = append(skipped, shadowed{o.Key, "the mount's side directory /" + SideDir + " has this name"})
			continue
		}
		d := root
		for _, p := range parts[:len(parts)-1] {
			next, ok := d.dirs[p]
			if !ok {
				next = newTreeDir()
				d.dirs[p] = next
			}
			d = next
		}
		d.files[parts[len(parts)-1]] = o
	}
	skipped = append(skipped, root.resolveCollisions("")...)
	return root, skipped
}

func (d *treeDir) resolveCollisions(prefix string) []shadowed {
	var out []shadowed
	for name, sub := range d.dirs {
		if o, ok := d.files[name]; ok {
			out = append(out, shadowed{o.Key, "a directory of the same name exists (" + prefix + name + "/)"})
			delete(d.files, name)
		}
		out = append(out, sub.resolveCollisions(prefix+name+"/")...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func validComponents(parts []string) bool {
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return false
		}
	}
	return true
}

// inodeNumber is stable across mounts: a hash of the path. Inode 1 is the
// root; the hash is kept clear of the small numbers go-fuse and the side
// directory use.
func inodeNumber(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	n := h.Sum64()
	if n < 1024 {
		n += 1024
	}
	return n
}
