package main

import (
	"fmt"

	"golang.org/x/sys/unix"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/store"
)

// pageCacheChoice is --page-cache: keep, direct, or auto, which is one of
// them once the listing is known.
type pageCacheChoice struct {
	auto  bool
	fixed shardfs.PageCache
}

const autoPageCache = "auto"

func parsePageCache(s string) (pageCacheChoice, error) {
	if s == autoPageCache {
		return pageCacheChoice{auto: true}, nil
	}
	p, err := shardfs.ParsePageCache(s)
	if err != nil {
		return pageCacheChoice{}, fmt.Errorf("%w (or %s)", err, autoPageCache)
	}
	return pageCacheChoice{fixed: p}, nil
}

// resolve picks the policy for a data set of objects on a machine with ram
// bytes of memory; wholeFiles says whether the mount keeps whole-shard
// files it may pass to the kernel (a cache dir with whole-shard room,
// passthrough not off). auto reads a data set larger than RAM directly:
// an epoch's pages are evicted before the next epoch reaches them, so
// keeping them buys nothing and costs the readers a second copy. Beside
// whole-shard files it reads directly while passthrough works: a shard
// read whole is then read from its file on its next open, and the
// mount's own pages would be a second copy of it (DirectBesideWholeFiles).
// A smaller data set without them keeps its pages: every later epoch is
// then read from memory.
func (c pageCacheChoice) resolve(objects []store.Object, ram int64, wholeFiles bool) shardfs.PageCache {
	if !c.auto {
		return c.fixed
	}
	var total int64
	for _, o := range objects {
		total += o.Size
	}
	switch {
	case ram > 0 && total > ram:
		return shardfs.DirectIO
	case wholeFiles:
		return shardfs.DirectBesideWholeFiles
	}
	return shardfs.KeepPages
}

// physicalMemory is the machine's RAM in bytes, 0 if unknown.
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
