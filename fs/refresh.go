package fs

import (
	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/shardfs/shardfs/store"
)

// Changes counts what an Update found between two listings.
type Changes struct {
	Added, Removed, Changed int // objects
}

// Update replaces the mount's listing with objs and tells the kernel what
// changed, so that new names appear and removed ones disappear without
// waiting for the entry timeouts. A changed object is a new inode (its
// number includes the ETag): its name is dropped so the next lookup finds
// the new one. New opens see the new versions; an open handle keeps its
// inode and the version it pinned: it reads that version (from its own
// pages, the cache, or the store while the store still has it) or fails
// with EIO, never bytes of another version.
func (r *Root) Update(objs []store.Object) Changes {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	old := r.m.tree()
	next, skipped := buildTree(objs)
	if len(skipped) > 0 {
		// The mount named each at warn level; a refresh every minute
		// repeating them all would drown the log, so it counts them.
		r.m.opts.Log.Debug("keys not shown in the mount", "count", len(skipped), "first", skipped[0].Key, "reason", skipped[0].Reason)
	}
	r.m.current.Store(next)
	var inode *gofs.Inode
	if r.m.mounted.Load() {
		inode = &r.Inode
	}
	var ch Changes
	diffDir(old, 0, next, 0, inode, &ch)
	return ch
}

// diffDir compares one directory of two trees (entries are sorted by name)
// and notifies the kernel through inode, the directory's inode when the
// kernel knows it (nil otherwise: then it has nothing cached below).
func diffDir(old *tree, od int32, next *tree, nd int32, inode *gofs.Inode, ch *Changes) {
	a, b := old.dirs[od].entries, next.dirs[nd].entries
	listed := false // the set of names changed: the cached readdir is stale
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case j == len(b) || i < len(a) && a[i].name < b[j].name:
			ch.Removed += old.count(a[i])
			notifyEntry(inode, a[i].name)
			listed = true
			i++
		case i == len(a) || b[j].name < a[i].name:
			ch.Added += next.count(b[j])
			notifyEntry(inode, b[j].name) // drops a cached "no such file"
			listed = true
			j++
		default:
			ea, eb := a[i], b[j]
			switch {
			case ea.isDir() != eb.isDir():
				ch.Removed += old.count(ea)
				ch.Added += next.count(eb)
				notifyEntry(inode, ea.name)
				listed = true
			case ea.isDir():
				diffDir(old, ^ea.ref, next, ^eb.ref, child(inode, ea.name), ch)
			default:
				if old.inode(ea) != next.inode(eb) {
					ch.Changed++
					notifyEntry(inode, ea.name)
					listed = true // the listing carries inode numbers
				}
			}
			i++
			j++
		}
	}
	if listed && inode != nil {
		_ = inode.NotifyContent(0, 0) // the directory's cached listing
	}
}

// child is the inode the kernel knows under name, or nil.
func child(dir *gofs.Inode, name string) *gofs.Inode {
	if dir == nil {
		return nil
	}
	return dir.GetChild(name)
}

// notifyEntry drops the kernel's dentry (or negative dentry) for name.
// An error means the kernel had nothing cached, which is fine.
func notifyEntry(dir *gofs.Inode, name string) {
	if dir != nil {
		_ = dir.NotifyEntry(name)
	}
}

// count is the number of objects an entry stands for.
func (t *tree) count(e entry) int {
	if !e.isDir() {
		return 1
	}
	n := 0
	for _, c := range t.dirs[^e.ref].entries {
		n += t.count(c)
	}
	return n
}
