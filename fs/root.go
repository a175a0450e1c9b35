package fs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shardfs/shardfs/store"
)

// SideDir is the hidden directory of side files.
const SideDir = ".shardfs"

// mountState is what every node of one mount shares. The tree is
// replaced whole by a refresh; everything else is read-only after New
// except for the handle counter.
type mountState struct {
	opts      Options
	current   atomic.Pointer[tree]
	mountTime time.Time
	handles   atomic.Uint64
	mounted   atomic.Bool // the kernel has the root: notifications can be sent
	hints     hintCounters
	// passthrough is set once the mount's probe found that the kernel
	// takes backing files (passthrough.go).
	passthrough atomic.Bool
	opens       [2]atomic.Uint64 // opens of shards by openMode
	openNow     atomic.Int64     // shard handles not yet released
	filler      *pageFiller      // page-cache fills (pagefill.go)
}

// tree is the listing as it stands now.
func (m *mountState) tree() *tree { return m.current.Load() }

// Root is the root directory of a mount.
type Root struct {
	dirNode
	refreshMu sync.Mutex // one Update at a time
}

var (
	_ = (gofs.NodeOnAdder)((*Root)(nil))
	_ = (gofs.NodeLookuper)((*Root)(nil))
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
	m := &mountState{
		opts:      opts,
		mountTime: time.Now(),
		filler:    newPageFiller(),
	}
	m.current.Store(m.build(opts.Objects))
	return &Root{dirNode: dirNode{m: m, path: ""}}, nil
}

// build makes a tree and logs the keys it cannot show.
func (m *mountState) build(objs []store.Object) *tree {
	t, skipped := buildTree(objs)
	for _, s := range skipped {
		m.opts.Log.Warn("key not shown in the mount", "effect", "key hidden", "key", s.Key, "reason", s.Reason)
	}
	return t
}

// OnAdd adds the side directory, the one persistent child; the listing's
// inodes are made as the kernel looks names up.
func (r *Root) OnAdd(ctx context.Context) {
	r.addSideDir(ctx)
	r.m.mounted.Store(true)
}

// Lookup finds the side directory by name (readdir does not list it) and
// everything else in the tree.
func (r *Root) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name == SideDir {
		r.m.dirAttr(&out.Attr)
		return r.GetChild(SideDir), 0
	}
	return r.dirNode.Lookup(ctx, name, out)
}

// Object returns the shard at a path relative to the mount root.
func (r *Root) Object(path string) (store.Object, bool) {
	return r.m.tree().object(path)
}

// Passthrough reports whether opens of shards held whole are passed to
// the kernel: asked for, and allowed by the mount's probe.
func (r *Root) Passthrough() bool { return r.m.passthrough.Load() }

// OpenStats counts the opens of shards passed through to the kernel and
// those served by the daemon.
func (r *Root) OpenStats() (passed, daemon uint64) {
	return r.m.opens[passedThrough].Load(), r.m.opens[viaDaemon].Load()
}

// FillStats counts the blocks handed to the kernel's page cache.
func (r *Root) FillStats() FillStats { return r.m.filler.stats() }

// OpenShards is the number of shard handles the kernel has not released.
func (r *Root) OpenShards() int64 { return r.m.openNow.Load() }

// HintStats counts the lines written to the hints file.
func (r *Root) HintStats() HintStats { return r.m.hints.stats() }

// ReadAt reads shard bytes through the mount's read path as one-shot
// reads; the GPU interface uses it to fill registered buffers.
func (r *Root) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	rd := r.m.opts.ReadPath.OpenReader(obj, true, 0)
	defer rd.Close()
	n, _, err := rd.ReadAt(ctx, p, off)
	return n, err
}
