package main

import (
	"context"
	"log/slog"

	"github.com/urfave/cli/v2"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/metrics"
)

// mountWiring holds everything one mount built, in the order it must be
// closed: the read path first, the store last.
type mountWiring struct {
	backend *backend
	root    *shardfs.Root
	metrics *metrics.Metrics
	kernel  shardfs.KernelOptions
	closers []func()
}

func newMountWiring(ctx context.Context, c *cli.Context, source, mountpoint string, log *slog.Logger) (_ *mountWiring, err error) {
	m := &mountWiring{}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	m.backend, err = openSource(ctx, c, source, log)
	if err != nil {
		return nil, err
	}
	blockSize, err := sizeFlag(c, "block-size")
	if err != nil {
		return nil, err
	}
	m.metrics = metrics.New()
	registerStoreMetrics(m.metrics, m.backend.meter, m.backend.retry)
	if addr := c.String("metrics-addr"); addr != "" {
		srv, err := m.metrics.Serve(addr)
		if err != nil {
			return nil, err
		}
		log.Info("serving metrics", "addr", "http://"+srv.Addr+"/metrics")
		m.closers = append(m.closers, func() { _ = srv.Close() })
	}
	m.root, err = shardfs.New(shardfs.Options{
		ObserveRead: m.metrics.ObserveRead,
		Stats:       m.metrics.JSON,
		Store:       m.backend.retry,
		Objects:     m.backend.objects,
		BlockSize:   blockSize,
		MountPoint:  mountpoint,
		UID:         uint32(c.Int("uid")),
		GID:         uint32(c.Int("gid")),
		Log:         log,
	})
	if err != nil {
		return nil, err
	}
	m.kernel = shardfs.DefaultKernelOptions()
	m.kernel.FSName = m.backend.retry.String()
	m.kernel.ReadAheadKB = c.Int("read-ahead-kb")
	m.kernel.MaxBackground = c.Int("max-background")
	m.kernel.AllowOther = c.Bool("allow-other")
	m.kernel.Debug = c.Bool("debug-fuse")
	return m, nil
}

// Close releases what the mount built, last built first.
func (m *mountWiring) Close() {
	for i := len(m.closers) - 1; i >= 0; i-- {
		m.closers[i]()
	}
	m.closers = nil
}
