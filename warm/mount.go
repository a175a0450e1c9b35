package warm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/store"
)

// ThroughMount carries out p through the mount at mountPoint, which owns
// the cache: each shard is read whole, in PartSize reads, through the
// mount, whose read path fills its cache. Each handle has the mount's
// read-ahead behind it, so a quarter of Concurrency shards are read at
// once. When ctx ends, it stops and returns what it did.
func ThroughMount(ctx context.Context, p Plan, mountPoint string, cfg Config) Result {
	rec := newRecorder(ctx, p, cfg.Progress)
	bufs := sync.Pool{New: func() any { return make([]byte, max(cfg.PartSize, 1)) }}
	objs := make([]store.Object, len(p.Shards))
	for i, s := range p.Shards {
		objs[i] = s.Obj
	}
	forEach(ctx, objs, cfg.Concurrency/4, func(o store.Object) {
		buf := bufs.Get().([]byte)
		defer bufs.Put(buf)
		rec.finish(o.Key, false, readWhole(ctx, filepath.Join(mountPoint, o.Key), buf, rec.fetched))
	})
	return rec.result()
}

// readWhole reads the file at path to its end, telling read of each read.
func readWhole(ctx context.Context, path string, buf []byte, read func(n int64)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Every block read must reach the cache, even where the mount would
	// skip a cache disk slower than the network. A mount that never skips
	// answers ENOTTY, which changes nothing.
	_ = unix.IoctlSetInt(int(f.Fd()), uint(shardfs.CmdFillCache), 0)
	for ctx.Err() == nil {
		n, err := f.Read(buf)
		read(int64(n))
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}
