package fs

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/shardfs/shardfs/store"
)

// GDS is the GPU interface of package gds, served on the ctl side file
// and on shard file descriptors (gds.Server satisfies it).
type GDS interface {
	// Capabilities is the content of /.shardfs/ctl.
	Capabilities(ctx context.Context) ([]byte, error)
	// Ioctl handles one ioctl on an open file; handle is unique per open,
	// obj is nil for the ctl file.
	Ioctl(ctx context.Context, handle uint64, uid, pid uint32, obj *store.Object, cmd uint32, in, out []byte) (int32, syscall.Errno)
	// Release drops what was registered on handle.
	Release(handle uint64)
}

// Options describe one mount's contents and read path.
type Options struct {
	Store   store.Store    // source of bytes (already wrapped for retries)
	Objects []store.Object // the listing the tree is built from

	ReadPath ReadPath // answers every read of a shard
	GDS      GDS      // nil: ctl serves capabilities "{}" and no ioctls

	// ObserveRead, when set, is told of every FUSE read: the tier that
	// served it (metrics.TierCache, metrics.TierNetwork), bytes, latency
	// and failure.
	ObserveRead func(tier string, n int, d time.Duration, err error)

	// WholeFiles is the cache's tier of shards held whole; nil: none,
	// and no passthrough.
	WholeFiles WholeFiles
	// Passthrough says whether opens of shards held whole may be passed
	// to the kernel (PassthroughAuto: when the mount's probe allows it).
	Passthrough Passthrough

	// Stats renders /.shardfs/stats; nil serves "{}".
	Stats func() ([]byte, error)

	// Index renders /.shardfs/index/PATH, the member index of a shard;
	// nil: the index directory is empty.
	Index MemberIndex

	// MountPoint lets hints name files by absolute path.
	MountPoint string

	UID, GID    uint32
	AttrTimeout time.Duration // entry and attribute timeout (default 1h)
	PageCache   PageCache     // whether the kernel keeps shard pages (KeepPages)
	Log         *slog.Logger
}
