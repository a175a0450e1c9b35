package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/cache/cachedir"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/listing"
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/tarindex"
)

// mountWiring holds everything one mount built, in the order it must be
// closed: the read path first, the store last.
type mountWiring struct {
	backend  *backend
	root     *shardfs.Root
	metrics  *metrics.Metrics
	cache    *cache.Cache
	prefetch *prefetch.Engine
	kernel   shardfs.KernelOptions
	closers  []func()
}

func newMountWiring(ctx context.Context, cfg mountConfig, source, mountpoint string, log *slog.Logger) (_ *mountWiring, err error) {
	m := &mountWiring{}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	m.backend, err = openStore(ctx, cfg.Source, source, log)
	if err != nil {
		return nil, err
	}
	m.cache, err = openMountCache(ctx, cfg.Cache, cfg.SharedRAM, m.backend, log)
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, func() {
		if err := m.cache.Close(); err != nil {
			log.Warn("closing cache", "err", err)
		}
	})
	// The listing comes after the cache: a copy persisted in the cache
	// dir is read under the dir's lock.
	if err := m.backend.list(ctx, cfg.Source, log); err != nil {
		return nil, err
	}
	atMount := listingAtMount(m.backend.meter)
	if dir := cfg.Cache.Dir; dir != "" {
		remove, err := cachedir.WriteOwner(dir, cachedir.Owner{Source: m.backend.retry.String(), MountPoint: mountpoint, PID: os.Getpid()})
		if err != nil {
			log.Warn("cache dir: cannot record the owning mount; shardfs warm will not find it", EffectKey, "warm cannot go through this mount", "err", err)
		} else {
			m.closers = append(m.closers, remove)
		}
	}
	m.prefetch = newPrefetcher(cfg.Prefetch, m.cache, m.backend.retry, m.backend.objects, log)
	m.closers = append(m.closers, m.prefetch.Close)
	m.closers = append(m.closers, followMemoryLimit(cfg.Prefetch.Memory, func() int64 { return m.cache.Stats().RAMBytes }, log))
	m.metrics = metrics.New()
	registerPrefetchMetrics(m.metrics, m.prefetch)
	registerCacheMetrics(m.metrics, m.cache)
	m.metrics.GaugeFunc("shardfs_goroutines", "Goroutines of the daemon (a number that keeps growing is a leak).", func() float64 { return float64(runtime.NumGoroutine()) })
	m.metrics.GaugeFunc("shardfs_daemon_pid", "Process id of the mount daemon (shardfs unmount waits for it).", func() float64 { return float64(os.Getpid()) })
	registerStoreMetrics(m.metrics, m.backend.meter, m.backend.retry)
	registerListingMetrics(m.metrics, m.backend.listing, atMount)
	if addr := cfg.MetricsAddr; addr != "" {
		srv, err := m.metrics.Serve(addr)
		if err != nil {
			return nil, err
		}
		log.Info("serving metrics", "addr", "http://"+srv.Addr+"/metrics")
		m.closers = append(m.closers, func() { _ = srv.Close() })
	}
	index, err := tarindex.New(m.backend.retry, indexConfigFor(cfg.Cache.Dir, m.backend.retry.String(), log))
	if err != nil {
		return nil, err
	}
	registerIndexMetrics(m.metrics, index)
	files := &rootFiles{cache: m.cache}
	gdsServer := newGDSServer(m.cache, files, log)
	m.closers = append(m.closers, gdsServer.Close)
	registerGDSMetrics(m.metrics, gdsServer)
	wholeFiles := cfg.Passthrough != shardfs.PassthroughOff && m.cache != nil && m.cache.WholeFilesDir() != ""
	pageCache := cfg.PageCache.resolve(m.backend.objects, physicalMemory(), wholeFiles)
	log.Info("page cache", "policy", pageCache.String())
	m.root, err = shardfs.New(shardfs.Options{
		GDS:         gdsServer,
		ObserveRead: m.metrics.ObserveRead,
		Stats:       m.metrics.JSON,
		Index:       index.JSONLines,
		Store:       m.backend.retry,
		Objects:     m.backend.objects,
		ReadPath:    readPath{m.prefetch},
		MountPoint:  mountpoint,
		UID:         cfg.UID,
		GID:         cfg.GID,
		PageCache:   pageCache,
		WholeFiles:  m.cache,
		Passthrough: cfg.Passthrough,
		Log:         log,
	})
	if err != nil {
		return nil, err
	}
	files.root = m.root
	registerHintMetrics(m.metrics, m.root)
	registerOpenMetrics(m.metrics, m.root)
	m.backend.listing.Start(m.backend.retry, func(objs []store.Object) listing.Changes {
		ch := m.root.Update(objs)
		m.prefetch.SetOrder(objs)
		return listing.Changes(ch)
	})
	m.closers = append(m.closers, m.backend.listing.Close) // closed first: no refresh runs into a closed read path
	m.kernel = cfg.Kernel
	m.kernel.FSName = m.backend.retry.String()
	return m, nil
}

// Close releases what the mount built, last built first.
func (m *mountWiring) Close() {
	for i := len(m.closers) - 1; i >= 0; i-- {
		m.closers[i]()
	}
	m.closers = nil
}

// openCache opens the cache cfg describes for one source.
func openCache(ctx context.Context, cfg cache.Config, b *backend, log *slog.Logger) (*cache.Cache, error) {
	cfg.Namespace, cfg.KeyPrefix = b.cacheNames()
	cc, err := cache.Open(ctx, cfg, log)
	if err != nil {
		if errors.Is(err, cache.ErrLocked) {
			return nil, fmt.Errorf("cache dir %s is in use by another mount: %w", cfg.Dir, err)
		}
		return nil, fmt.Errorf("cache: %w", err)
	}
	return cc, nil
}
