package main

import (
	"context"
	"log/slog"

	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/gds"
	"github.com/shardfs/shardfs/store"
)

// rootFiles lets the side interface read through a root that is built
// after it (the root needs the server, the server reads through the root).
type rootFiles struct{ root *shardfs.Root }

func (f *rootFiles) Object(path string) (store.Object, bool) { return f.root.Object(path) }

func (f *rootFiles) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	return f.root.ReadAt(ctx, obj, p, off)
}

// newSideServer builds the GPU side interface. Leases need the ring; with
// no ring, LEASE answers EOPNOTSUPP and capabilities say so.
func newSideServer(cc *cache.Cache, files *rootFiles, log *slog.Logger) *gds.Server {
	var leaser gds.Leaser
	if cc.Stats().RingEnabled {
		leaser = cc
	}
	return gds.NewServer(gds.Config{BlockSize: cc.BlockSize()}, files, leaser, gds.NewNVMLSource(nil), log)
}
