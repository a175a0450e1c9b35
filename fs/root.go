package fs

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shardfs/shardfs/store"
)

// SideDir is the hidden directory of side files.
const SideDir = ".shardfs"

// mountState is what every node of one mount shares. It is read-only
// after New except for the handle counter.
type mountState struct {
	opts      Options
	chain     chain
	oneShot   chain                   // for reads without a handle
	objects   map[string]store.Object // visible path -> object
	mountTime time.Time
	handles   atomic.Uint64
	hints     hintCounters
}

// Root is the root directory of a mount.
type Root struct {
	dirNode
	tree *treeDir
}

var (
	_ = (gofs.NodeOnAdder)((*Root)(nil))
	_ = (gofs.NodeReaddirer)((*Root)(nil))
)

// New builds the tree from opts.Objects. Keys that cannot be shown are
// logged with the reason.
func New(opts Options) (*Root, error) {
	if opts.Store == nil || opts.Log == nil {
		return nil, fmt.Errorf("fs: Store and Log are required")
	}
	if opts.AttrTimeout <= 0 {
		opts.AttrTimeout = time.Hour
	}
	tree, skipped := buildTree(opts.Objects)
	for _, s := range skipped {
		opts.Log.Warn("key not shown in the mount", "key", s.Key, "reason", s.Reason)
	}
	m := &mountState{
		opts:      opts,
		chain:     newChain(opts.Store, opts.Cache, opts.Prefetcher, opts.BlockSize),
		oneShot:   newOneShotChain(opts.Store, opts.Cache, opts.Prefetcher, opts.BlockSize),
		objects:   map[string]store.Object{},
		mountTime: time.Now(),
	}
	r := &Root{dirNode: dirNode{m: m, path: ""}, tree: tree}
	return r, nil
}

// OnAdd creates the whole tree as persistent inodes: the listing is known
// up front, and stable inode numbers follow from the paths.
func (r *Root) OnAdd(ctx context.Context) {
	r.addDir(ctx, &r.Inode, "", r.tree)
	r.addSideDir(ctx)
}

func (r *Root) addDir(ctx context.Context, parent *gofs.Inode, prefix string, d *treeDir) {
	for name, sub := range d.dirs {
		path := prefix + name
		node := &dirNode{m: r.m, path: path}
		child := parent.NewPersistentInode(ctx, node, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: inodeNumber(path)})
		parent.AddChild(name, child, false)
		r.addDir(ctx, child, path+"/", sub)
	}
	for name, obj := range d.files {
		path := prefix + name
		r.m.objects[path] = obj
		node := &fileNode{m: r.m, obj: obj}
		child := parent.NewPersistentInode(ctx, node, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: inodeNumber(path)})
		parent.AddChild(name, child, false)
	}
}

// Readdir lists the root without the side directory, so that `find` and
// `ls` show exactly the keys.
func (r *Root) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	children := r.Children()
	entries := make([]fuse.DirEntry, 0, len(children))
	for name, child := range children {
		if name == SideDir {
			continue
		}
		entries = append(entries, fuse.DirEntry{Name: name, Mode: child.Mode(), Ino: child.StableAttr().Ino})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return gofs.NewListDirStream(entries), 0
}

// Object returns the shard at a path relative to the mount root.
func (r *Root) Object(path string) (store.Object, bool) {
	obj, ok := r.m.objects[path]
	return obj, ok
}

// HintStats counts the lines written to the hints file.
func (r *Root) HintStats() HintStats { return r.m.hints.stats() }

// ReadAt reads shard bytes through the mount's read path; the GPU side
// interface uses it to fill registered buffers.
func (r *Root) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	st := &readState{obj: obj}
	defer st.close()
	n, _, err := r.m.oneShot.readAt(ctx, st, p, off)
	return n, err
}
