// Command mountd mounts a local directory with the GPU side interface and a
// cache ring, for the Python client tests (gds/python/test_client.py) on a
// machine where the shardfs command is not at hand. It stays in the
// foreground until SIGINT/SIGTERM, then unmounts.
//
//	go run ./gds/testdata/mountd -source DIR -mount MNT [-cache DIR] [-memory BYTES]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/gds"
	"github.com/shardfs/shardfs/store"
)

// lateFiles lets the side server exist before the root it reads through.
type lateFiles struct{ root *shardfs.Root }

func (f *lateFiles) Object(path string) (store.Object, bool) { return f.root.Object(path) }
func (f *lateFiles) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	return f.root.ReadAt(ctx, obj, p, off)
}

func main() {
	source := flag.String("source", "", "directory to serve")
	mnt := flag.String("mount", "", "mountpoint")
	cacheDir := flag.String("cache", "", "cache ring directory (empty: no ring, no leases)")
	blockSize := flag.Int64("block-size", 1<<20, "cache block size")
	memory := flag.Int64("memory", 512<<20, "RAM tier bytes (0: ring only)")
	flag.Parse()
	if err := run(*source, *mnt, *cacheDir, *blockSize, *memory); err != nil {
		fmt.Fprintln(os.Stderr, "mountd:", err)
		os.Exit(1)
	}
}

func run(source, mnt, cacheDir string, blockSize, memory int64) error {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := store.NewLocal(source)
	if err != nil {
		return err
	}
	objs, err := st.List(ctx)
	if err != nil {
		return err
	}
	opts := shardfs.Options{Store: st, Objects: objs, BlockSize: blockSize, MountPoint: mnt, Log: log,
		UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	files := &lateFiles{}
	var leaser gds.Leaser
	if cacheDir != "" {
		c, err := cache.Open(ctx, cache.Config{Dir: cacheDir, Size: 256 << 20, MemorySize: memory, BlockSize: blockSize, Namespace: source}, log)
		if err != nil {
			return err
		}
		defer c.Close()
		opts.Cache, leaser = c, c
	}
	side := gds.NewServer(gds.Config{BlockSize: blockSize}, files, leaser, gds.NewNVMLSource(nil), log)
	defer side.Close()
	opts.Side = side
	root, err := shardfs.New(opts)
	if err != nil {
		return err
	}
	files.root = root
	srv, err := shardfs.Mount(mnt, root, shardfs.DefaultKernelOptions())
	if err != nil {
		return err
	}
	fmt.Println("mounted", mnt)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		srv.Unmount()
	}()
	srv.Wait()
	return nil
}
