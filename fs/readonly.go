package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnly answers EROFS to every operation that would change the tree.
// Nodes embed it; the mount is read-only always.
type readOnly struct{}

var (
	_ = (gofs.NodeMkdirer)((*readOnly)(nil))
	_ = (gofs.NodeMknoder)((*readOnly)(nil))
	_ = (gofs.NodeCreater)((*readOnly)(nil))
	_ = (gofs.NodeUnlinker)((*readOnly)(nil))
	_ = (gofs.NodeRmdirer)((*readOnly)(nil))
	_ = (gofs.NodeRenamer)((*readOnly)(nil))
	_ = (gofs.NodeSymlinker)((*readOnly)(nil))
	_ = (gofs.NodeLinker)((*readOnly)(nil))
	_ = (gofs.NodeSetattrer)((*readOnly)(nil))
	_ = (gofs.NodeSetxattrer)((*readOnly)(nil))
	_ = (gofs.NodeRemovexattrer)((*readOnly)(nil))
)

func (readOnly) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnly) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (readOnly) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (readOnly) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }

// writeFlags reports whether open flags ask for anything but reading.
func writeFlags(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_APPEND) != 0
}
