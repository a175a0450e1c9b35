package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/gds"
)

// sharedRAMDir is where a shared RAM tier's file lives: the tmpfs every
// Linux has, where the GPU interface's buffers live too.
const sharedRAMDir = "/dev/shm"

// sharedRAMChoice is --memory-cache-shared: on, off, or auto (on when the
// daemon sees an NVIDIA GPU).
type sharedRAMChoice string

const (
	sharedRAMAuto sharedRAMChoice = "auto"
	sharedRAMOn   sharedRAMChoice = "on"
	sharedRAMOff  sharedRAMChoice = "off"
)

func parseSharedRAM(s string) (sharedRAMChoice, error) {
	switch c := sharedRAMChoice(s); c {
	case sharedRAMAuto, sharedRAMOn, sharedRAMOff:
		return c, nil
	}
	return "", fmt.Errorf("%q: want auto, on or off", s)
}

// dir is the cache's SharedMemoryDir for this choice: auto asks the
// NVIDIA driver whether there is a GPU to copy to.
func (c sharedRAMChoice) dir(ctx context.Context) string {
	switch c {
	case sharedRAMOn:
		return sharedRAMDir
	case sharedRAMAuto:
		if gpus, err := gds.DiscoverGPUs(ctx); err == nil && len(gpus) > 0 {
			return sharedRAMDir
		}
	}
	return ""
}

// openMountCache opens the mount's cache with the RAM tier shared as
// chosen. A tier that auto made shared and that cannot be (a /dev/shm too
// small for it, as in a container's default 64 MiB) stays on the heap,
// with a warning; one asked for with on fails the mount.
func openMountCache(ctx context.Context, cfg cache.Config, choice sharedRAMChoice, b *backend, log *slog.Logger) (*cache.Cache, error) {
	if cfg.MemorySize > 0 {
		cfg.SharedMemoryDir = choice.dir(ctx)
	}
	cc, err := openCache(ctx, cfg, b, log)
	switch {
	case err == nil || !errors.Is(err, cache.ErrSharedMemory):
		return cc, err
	case choice == sharedRAMAuto:
		log.Warn("RAM tier not shared: GPU clients read it through READ", "err", err)
		cfg.SharedMemoryDir = ""
		return openCache(ctx, cfg, b, log)
	}
	return nil, fmt.Errorf("%w (a smaller --memory-cache-size, or --memory-cache-shared off)", err)
}
