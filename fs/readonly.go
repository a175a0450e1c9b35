package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnly answers EROFS to every operation that would change the tree,
// and tells the kernel the mount has no extended attributes. Nodes embed
// it; the mount is read-only always.
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
	_ = (gofs.NodeGetxattrer)((*readOnly)(nil))
	_ = (gofs.NodeListxattrer)((*readOnly)(nil))
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

// Getxattr answers ENOSYS, which the kernel takes as "this filesystem has
// no extended attributes": it remembers that for the life of the mount and
// answers every later getxattr itself (EOPNOTSUPP, or ENODATA for an ACL).
// Without it `ls -l` sends two requests per file to the daemon
// (security.selinux and the POSIX ACL) every time it runs.
func (readOnly) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Listxattr answers ENOSYS for the same reason: cp -a, tar --xattrs and
// rsync -X see EOPNOTSUPP and the kernel stops asking.
func (readOnly) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// writeFlags reports whether open flags ask for anything but reading.
func writeFlags(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_APPEND) != 0
}
