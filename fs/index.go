package fs

import (
	"context"
	"path"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shardfs/shardfs/store"
)

// sideIndex is /.shardfs/index: /.shardfs/index/PATH is the member index of
// the shard at PATH (Options.Index renders it: JSON lines of name, data
// offset and size). Its directories mirror the mount's, by lookup only: a
// readdir lists nothing, since listing an index per shard would build them.
const sideIndex = "index"

// indexDir is a directory of /.shardfs/index, for the mount directory at
// path.
type indexDir struct {
	gofs.Inode
	readOnly
	m    *mountState
	path string
}

var (
	_ = (gofs.NodeGetattrer)((*indexDir)(nil))
	_ = (gofs.NodeLookuper)((*indexDir)(nil))
)

func (d *indexDir) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.dirAttr(&out.Attr)
	out.SetTimeout(d.m.opts.AttrTimeout)
	return 0
}

func (d *indexDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.m.opts.Index == nil {
		return nil, syscall.ENOENT
	}
	t := d.m.tree()
	p := path.Join(d.path, name)
	e, ok := t.find(p)
	if !ok {
		return nil, syscall.ENOENT
	}
	if e.isDir() {
		d.m.dirAttr(&out.Attr)
		return d.NewInode(ctx, &indexDir{m: d.m, path: p}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: inodeNumber(p, "/index/")}), 0
	}
	obj := t.objs[e.ref]
	index := d.m.opts.Index
	node := &snapshotFile{m: d.m, render: func(ctx context.Context) ([]byte, error) { return index(ctx, obj, t.object) }}
	out.Mode = syscall.S_IFREG | 0o444
	out.Nlink = 1
	d.m.fillOwner(&out.Attr)
	return d.NewInode(ctx, node, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: inodeNumber(obj.Key, "\x00index\x00"+obj.ETag)}), 0
}

// MemberIndex renders the member index of one shard version; find looks
// up other objects of the listing (a sidecar index beside the shard).
type MemberIndex func(ctx context.Context, obj store.Object, find func(key string) (store.Object, bool)) ([]byte, error)
