package fs

import (
	"context"
	"errors"
	"io"
	"sync"
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
	m     *mountState
	obj   store.Object
	opens inodeOpens // see passthrough.go
	fills blockSet   // blocks handed to the page cache (pagefill.go)
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

// Open pins the inode's version for the life of the handle. A shard the
// cache holds whole may be passed to the kernel (passthrough.go, which
// decides); otherwise the kernel keeps its page cache across opens (the
// ETag pins the content of the inode) or, when the mount reads directly
// (readsDirect), has every read answered by the daemon.
func (f *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writeFlags(flags) {
		return nil, 0, syscall.EROFS
	}
	h := &fileHandle{m: f.m, node: f, id: f.m.handles.Add(1), obj: f.obj}
	if caller, ok := fuse.FromContext(ctx); ok {
		h.opener = caller.Pid
	}
	mode, backing := f.openMode()
	f.m.opens[mode].Add(1)
	f.m.openNow.Add(1)
	if mode == passedThrough {
		// No FOPEN_DIRECT_IO: it would override the passthrough. The
		// reader is made only if a READ ever comes.
		return &passthroughHandle{fileHandle: h, backing: backing}, 0, 0
	}
	h.readerFor() // the read-ahead stream is known from the open on
	if f.m.readsDirect() {
		return h, fuse.FOPEN_DIRECT_IO, 0
	}
	h.fills = true
	if lender, ok := h.readerFor().(BlockLender); ok {
		lender.KeepsPages()
	}
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// fileHandle is one open of a shard. Its reads may run concurrently.
type fileHandle struct {
	m    *mountState
	node *fileNode
	id   uint64
	obj  store.Object
	// opener is the pid of the request that opened the handle.
	opener uint32

	readerOnce sync.Once
	reader     Reader // nil until readerFor, and after Release
	// fills: the kernel keeps this handle's pages, and a random read's
	// block may be handed to them (pagefill.go).
	fills bool
}

// readerFor returns the handle's reader, made on first use.
func (h *fileHandle) readerFor() Reader {
	h.readerOnce.Do(func() { h.reader = h.m.opts.ReadPath.OpenReader(h.obj, false, h.opener) })
	return h.reader
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
	reader := h.readerFor()
	data, tier, release, err := reader.Read(ctx, dest, off)
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
	if lender, ok := reader.(BlockLender); ok && h.fills {
		h.m.filler.offer(h.node, lender, off, len(dest))
	}
	return newReadResult(rep), 0
}

func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.readerOnce.Do(func() {}) // no reader is made after this
	if h.reader != nil {
		h.reader.Close()
	}
	h.node.released()
	h.m.openNow.Add(-1)
	if h.m.opts.GDS != nil {
		h.m.opts.GDS.Release(h.id)
	}
	return 0
}

func (h *fileHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, in, out []byte) (int32, syscall.Errno) {
	if cmd == CmdFillCache {
		return 0, h.fillCache()
	}
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
