package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirNode is a directory of the listing (or the side directory).
type dirNode struct {
	gofs.Inode
	readOnly
	m    *mountState
	path string
}

var _ = (gofs.NodeGetattrer)((*dirNode)(nil))

func (d *dirNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	d.m.fillOwner(&out.Attr)
	out.SetTimes(nil, &d.m.mountTime, &d.m.mountTime)
	out.SetTimeout(d.m.opts.AttrTimeout)
	return 0
}

func (m *mountState) fillOwner(a *fuse.Attr) {
	a.Uid = m.opts.UID
	a.Gid = m.opts.GID
}
