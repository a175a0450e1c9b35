package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirNode is a directory of the listing. It answers LOOKUP and READDIR
// from the mount's current tree, so that inodes exist only for the names
// the kernel asked about and a refreshed listing shows at the next lookup.
type dirNode struct {
	gofs.Inode
	readOnly
	m    *mountState
	path string
}

var (
	_ = (gofs.NodeGetattrer)((*dirNode)(nil))
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
	_ = (gofs.NodeOpendirHandler)((*dirNode)(nil))
)

func (d *dirNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.dirAttr(&out.Attr)
	out.SetTimeout(d.m.opts.AttrTimeout)
	return 0
}

func (m *mountState) dirAttr(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	m.fillOwner(a)
	a.SetTimes(nil, &m.mountTime, &m.mountTime)
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	t := d.m.tree()
	dir, ok := t.dir(d.path)
	if !ok {
		return nil, syscall.ENOENT
	}
	e, ok := t.lookup(dir, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	if e.isDir() {
		d.m.dirAttr(&out.Attr)
		node := &dirNode{m: d.m, path: t.path(e)}
		return d.NewInode(ctx, node, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: t.inode(e)}), 0
	}
	obj := t.objs[e.ref]
	d.m.fileAttr(&out.Attr, obj)
	return d.NewInode(ctx, &fileNode{m: d.m, obj: obj}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: t.inode(e)}), 0
}

// OpendirHandle lists the directory once per open and lets the kernel
// keep the listing (FOPEN_CACHE_DIR): a second `ls` reads it from the
// page cache. A refresh that changes the directory drops that copy.
func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	t := d.m.tree()
	dir, ok := t.dir(d.path)
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	es := t.dirs[dir].entries
	list := make([]fuse.DirEntry, len(es))
	for i, e := range es {
		mode := uint32(syscall.S_IFREG)
		if e.isDir() {
			mode = syscall.S_IFDIR
		}
		list[i] = fuse.DirEntry{Name: e.name, Mode: mode, Ino: t.inode(e)}
	}
	// The list stream also reads entries one by one and seeks, which is
	// all go-fuse asks of a directory handle.
	return gofs.NewListDirStream(list), fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

func (m *mountState) fillOwner(a *fuse.Attr) {
	a.Uid = m.opts.UID
	a.Gid = m.opts.GID
}
