package fs

import (
	"hash/fnv"
	"slices"
	"strings"

	"github.com/shardfs/shardfs/store"
)

// tree is one immutable snapshot of the listing as directories. The
// objects stay in the listing's own slice; each directory holds its
// entries sorted by name, and a name is a substring of its key, so the
// tree adds one 24-byte entry per key and nothing per lookup. Inodes are
// made from it only for the names the kernel looks up.
type tree struct {
	objs []store.Object
	dirs []treeDir // dirs[0] is the root
}

// treeDir is one directory: its path ("" for the root, "a/b" below) and its
// entries, sorted by name.
type treeDir struct {
	path    string
	entries []entry
}

// entry is one name in a directory: an object (ref >= 0 indexes objs) or a
// directory (ref < 0: ^ref indexes dirs).
type entry struct {
	name string
	ref  int32
}

func (e entry) isDir() bool { return e.ref < 0 }

// shadowed is a key that cannot appear in the tree, and why.
type shadowed struct {
	Key    string
	Reason string
}

// buildTree turns a listing into a directory tree. Rules, applied so the
// result does not depend on listing order:
//   - "/" separates directories; empty, "." and ".." components make a key
//     unrepresentable and it is skipped.
//   - When "a" is an object and also a directory (because "a/b" exists),
//     the directory wins and the object "a" is shadowed, as mountpoint-s3
//     does. Shadowed keys are reported so the caller can log them.
//   - A key that is, or lies under, the side directory (SideDir) is
//     shadowed by it, as a directory wins over an object of its name.
//
// objs is kept, not copied: the caller must not change it afterwards.
func buildTree(objs []store.Object) (*tree, []shadowed) {
	t := &tree{objs: objs, dirs: []treeDir{{}}}
	index := map[string]int32{"": 0}
	var skipped []shadowed
	// Listings come sorted, so a directory's keys mostly arrive together:
	// remember the last one instead of asking the map for every key.
	lastPath, last := "", int32(0)
	for i := range objs {
		key := objs[i].Key
		if !validKey(key) {
			skipped = append(skipped, shadowed{key, "key has an empty, '.' or '..' path component"})
			continue
		}
		if first, _, _ := strings.Cut(key, "/"); first == SideDir {
			skipped = append(skipped, shadowed{key, "the mount's side directory /" + SideDir + " has this name"})
			continue
		}
		dirPath, name := "", key
		if slash := strings.LastIndexByte(key, '/'); slash >= 0 {
			dirPath, name = key[:slash], key[slash+1:]
		}
		if dirPath != lastPath || i == 0 {
			lastPath, last = dirPath, t.dirIndex(index, dirPath)
		}
		t.dirs[last].entries = append(t.dirs[last].entries, entry{name: name, ref: int32(i)})
	}
	for d := range t.dirs {
		skipped = append(skipped, t.sortDir(int32(d))...)
	}
	slices.SortFunc(skipped, func(a, b shadowed) int { return strings.Compare(a.Key, b.Key) })
	return t, skipped
}

// dirIndex returns the directory at path, creating it and its parents.
func (t *tree) dirIndex(index map[string]int32, path string) int32 {
	if d, ok := index[path]; ok {
		return d
	}
	parentPath, name := "", path
	if slash := strings.LastIndexByte(path, '/'); slash >= 0 {
		parentPath, name = path[:slash], path[slash+1:]
	}
	parent := t.dirIndex(index, parentPath)
	d := int32(len(t.dirs))
	t.dirs = append(t.dirs, treeDir{path: path})
	t.dirs[parent].entries = append(t.dirs[parent].entries, entry{name: name, ref: ^d})
	index[path] = d
	return d
}

// sortDir sorts one directory's entries and drops the names that appear
// twice: a directory wins over an object of the same name, and of two
// objects with one key (a manifest that repeats it) the later one stays.
func (t *tree) sortDir(d int32) []shadowed {
	es := t.dirs[d].entries
	cmp := func(a, b entry) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return int(b.ref>>31) - int(a.ref>>31) // directories after objects of one name
	}
	if !slices.IsSortedFunc(es, cmp) {
		slices.SortStableFunc(es, cmp)
	}
	var skipped []shadowed
	out := es[:0]
	for _, e := range es {
		if n := len(out); n > 0 && out[n-1].name == e.name {
			prev := out[n-1]
			reason := "the key is listed twice; the later entry is shown"
			if e.isDir() {
				reason = "a directory of the same name exists (" + t.dirs[^e.ref].path + "/)"
			}
			skipped = append(skipped, shadowed{t.objs[prev.ref].Key, reason})
			out[n-1] = e
			continue
		}
		out = append(out, e)
	}
	clear(es[len(out):])
	t.dirs[d].entries = out
	return skipped
}

// lookup finds name in directory d.
func (t *tree) lookup(d int32, name string) (entry, bool) {
	es := t.dirs[d].entries
	i, ok := slices.BinarySearchFunc(es, name, func(e entry, n string) int { return strings.Compare(e.name, n) })
	if !ok {
		return entry{}, false
	}
	return es[i], true
}

// find resolves a path relative to the root; "" is the root directory.
func (t *tree) find(path string) (entry, bool) {
	cur := entry{ref: ^0}
	for path != "" {
		if !cur.isDir() {
			return entry{}, false
		}
		var name string
		name, path, _ = strings.Cut(path, "/")
		var ok bool
		if cur, ok = t.lookup(^cur.ref, name); !ok {
			return entry{}, false
		}
	}
	return cur, true
}

// dir returns the index of the directory at path.
func (t *tree) dir(path string) (int32, bool) {
	e, ok := t.find(path)
	if !ok || !e.isDir() {
		return 0, false
	}
	return ^e.ref, true
}

// object returns the object at path.
func (t *tree) object(path string) (store.Object, bool) {
	e, ok := t.find(path)
	if !ok || e.isDir() {
		return store.Object{}, false
	}
	return t.objs[e.ref], true
}

// path is the full path of an entry: an object's key or a directory's path.
func (t *tree) path(e entry) string {
	if e.isDir() {
		return t.dirs[^e.ref].path
	}
	return t.objs[e.ref].Key
}

func validKey(key string) bool {
	for {
		comp, rest, more := strings.Cut(key, "/")
		if comp == "" || comp == "." || comp == ".." {
			return false
		}
		if !more {
			return true
		}
		key = rest
	}
}

// inode is the inode number of an entry: for a directory its path, for an
// object its key and ETag, so that new content is a new inode.
func (t *tree) inode(e entry) uint64 {
	if e.isDir() {
		return inodeNumber(t.dirs[^e.ref].path, "/")
	}
	o := &t.objs[e.ref]
	return inodeNumber(o.Key, "\x00"+o.ETag)
}

// inodeNumber is stable across mounts: a hash of the path and what tells
// its kinds and versions apart ("/" for a directory, so that a name that
// turns from object into directory gets a new inode; the ETag for an
// object). Inode 1 is the root; the hash is kept clear of the small
// numbers go-fuse and the side directory use.
func inodeNumber(path, kind string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	h.Write([]byte(kind))
	n := h.Sum64()
	if n < 1024 {
		n += 1024
	}
	return n
}
