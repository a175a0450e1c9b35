package fs

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shardfs/shardfs/store"
)

// fileNode is one version of one shard: its inode number is made from the
// key and the ETag, so a refresh that finds new content makes a new inode.
// The kernel keeps page caches per inode: a handle opened before the
// change keeps the old inode and its pages, and never sees pages of the
// new version, which new opens fill under the new inode.
type fileNode struct {
	gofs.Inode
	readOnly
	m   *mountState
	obj store.Object
}

var (
	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeOpener)((*fileNode)(nil))
)

func (f *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.m.fileAttr(&out.Attr, f.obj)
	out.SetTimeout(f.m.opts.AttrTimeout)
	return 0
}

func (m *mountState) fileAttr(a *fuse.Attr, obj store.Object) {
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = uint64(obj.Size)
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 1 << 20 // tools size their reads from st_blksize
	m.fillOwner(a)
	mt := obj.ModTime
	a.SetTimes(&mt, &mt, &mt)
}

// Open pins the inode's version for the life of the handle and keeps the
// kernel page cache across opens (the ETag pins the content of the inode),
// or, under DirectIO, has every read answered by the daemon.
func (f *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writeFlags(flags) {
		return nil, 0, syscall.EROFS
	}
	h := &fileHandle{m: f.m, id: f.m.handles.Add(1), obj: f.obj, reader: f.m.opts.ReadPath.OpenReader(f.obj, false)}
	if f.m.opts.PageCache == DirectIO {
		return h, fuse.FOPEN_DIRECT_IO, 0
	}
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// fileHandle is one open of a shard. Its reads may run concurrently.
type fileHandle struct {
	m      *mountState
	id     uint64
	obj    store.Object
	reader Reader
}

var (
	_ = (gofs.FileReader)((*fileHandle)(nil))
	_ = (gofs.FileReleaser)((*fileHandle)(nil))
	_ = (gofs.FileIoctler)((*fileHandle)(nil))
)

// Read answers from the bytes the reader returns, in place: go-fuse writes
// the reply straight from a cache block or a pinned prefetch part, and
// Done releases the part once it has.
func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	start := time.Now()
	data, tier, release, err := h.reader.Read(ctx, dest, off)
	rep := reply{data: data, release: release}
	if err != nil && errors.Is(err, io.EOF) {
		err = nil
	}
	if obs := h.m.opts.ObserveRead; obs != nil {
		obs(tier, len(rep.data), time.Since(start), err)
	}
	if err != nil {
		rep.done()
		h.m.opts.Log.Error("read failed", "key", h.obj.Key, "offset", off, "size", len(dest), "err", err)
		return nil, errnoFor(err)
	}
	return newReadResult(rep), 0
}

func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.reader.Close()
	if h.m.opts.GDS != nil {
		h.m.opts.GDS.Release(h.id)
	}
	return 0
}

func (h *fileHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, in, out []byte) (int32, syscall.Errno) {
	obj := h.obj
	return h.m.ioctl(ctx, h.id, &obj, cmd, in, out)
}

func (m *mountState) ioctl(ctx context.Context, handle uint64, obj *store.Object, cmd uint32, in, out []byte) (int32, syscall.Errno) {
	if m.opts.GDS == nil {
		return 0, syscall.ENOTTY
	}
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return 0, syscall.EPERM
	}
	return m.opts.GDS.Ioctl(ctx, handle, caller.Uid, caller.Pid, obj, cmd, in, out)
}
