package main

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/shardfs/shardfs/cgroup"
)

// memoryRoom is what the daemon holds beyond part buffers and RAM-tier
// blocks. A full read-ahead budget leaves the collector only this room:
// it runs each time that much is allocated, and each run empties the
// FUSE server's buffer pools, which then allocate afresh; too little room
// makes the collector run so often that it costs more CPU than the reads.
const memoryRoom = 128 << 20

// memoryLimitEvery is how often the limit follows the RAM tier.
const memoryLimitEvery = 250 * time.Millisecond

// memoryLimit is the Go memory limit for a daemon whose read-ahead budget
// is prefetchMemory and whose RAM tier holds ramHeld bytes now.
func memoryLimit(prefetchMemory, ramHeld int64) int64 {
	return prefetchMemory + ramHeld + memoryRoom
}

// followMemoryLimit tells the Go runtime what the daemon holds: the
// read-ahead budget, what the RAM tier holds now (ramHeld), and room for
// everything else, so freed part buffers are returned promptly instead of
// when the heap doubles. It follows the RAM tier instead of counting its
// capacity: a sequential read never fills that tier, and a limit that
// counted it would let freed part buffers pile up to the tier's size. The
// returned stop ends the goroutine that follows it.
func followMemoryLimit(prefetchMemory int64, ramHeld func() int64, log *slog.Logger) (stop func()) {
	set := func() int64 {
		limit := memoryLimit(prefetchMemory, ramHeld())
		debug.SetMemoryLimit(limit)
		return limit
	}
	log.Debug("memory limit", "bytes", set())
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(memoryLimitEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				set()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// Sizing the budgets to a memory cap. The cap is --memory-target, else the
// limit of the daemon's cgroup (cgroup.MemoryLimit). Budgets the user left
// to their defaults are sized so that they and memoryRoom add up to the
// target: --memory-target itself, or memoryTargetPercent of a cgroup limit,
// which leaves the rest of the limit for what the room does not bound (the
// runtime's own overhead, the kernel's charges to the group). They split
// it evenly, each at most its flag's default, read-ahead never under
// minPrefetchParts parts and a RAM tier under minRAMTier left off. A
// budget the user set is kept and only checked: with the smallest
// read-ahead where that is left to size, it and memoryRoom must fit under
// the cap itself. Without a cap the flags are used as they are.
const (
	memoryTargetPercent = 75
	minPrefetchParts    = 4        // fewer, and a sequential reader waits on each GET
	minPrefetchMemory   = 32 << 20 // read-ahead under a small --part-size
	minRAMTier          = 32 << 20 // a smaller tier keeps too few blocks for random readers to come back to
)

// memoryAsk is what sizeMemory sizes: the caps and the flags as given.
type memoryAsk struct {
	Target      int64        // --memory-target; 0 when not given
	Limit       cgroup.Limit // the daemon's cgroup limit; zero without one
	Prefetch    int64        // --prefetch-memory, its default when not given
	RAM         int64        // --memory-cache-size, its default when not given
	PrefetchSet bool         // the user gave --prefetch-memory
	RAMSet      bool         // the user gave --memory-cache-size
	PartSize    int64        // --part-size
}

// sizeMemory is the read-ahead budget and the RAM tier for ask, or the
// reason the flags cannot fit, in one line naming the cap.
func sizeMemory(ask memoryAsk) (prefetchMemory, ramTier int64, err error) {
	var capBytes, target int64
	var capName string
	switch {
	case ask.Target > 0:
		if ask.Limit.Bytes > 0 && ask.Target > ask.Limit.Bytes {
			return 0, 0, fmt.Errorf("--memory-target %s is over the %s", formatSize(ask.Target), limitName(ask.Limit))
		}
		capBytes, target, capName = ask.Target, ask.Target, "--memory-target "+formatSize(ask.Target)
	case ask.Limit.Bytes > 0:
		capBytes, target, capName = ask.Limit.Bytes, ask.Limit.Bytes/100*memoryTargetPercent+ask.Limit.Bytes%100*memoryTargetPercent/100, "the "+limitName(ask.Limit)
	default:
		return ask.Prefetch, ask.RAM, nil
	}
	minPrefetch := max(minPrefetchParts*ask.PartSize, minPrefetchMemory)
	budget := target - memoryRoom // for read-ahead and the RAM tier together
	switch {
	case ask.PrefetchSet && ask.RAMSet:
		if need := ask.Prefetch + ask.RAM + memoryRoom; need > capBytes {
			return 0, 0, fmt.Errorf("--prefetch-memory %s and --memory-cache-size %s need %s, over %s",
				formatSize(ask.Prefetch), formatSize(ask.RAM), formatSize(need), capName)
		}
		return ask.Prefetch, ask.RAM, nil
	case ask.PrefetchSet:
		if need := ask.Prefetch + memoryRoom; need > capBytes {
			return 0, 0, fmt.Errorf("--prefetch-memory %s needs %s, over %s", formatSize(ask.Prefetch), formatSize(need), capName)
		}
		return ask.Prefetch, ramTierOf(min(ask.RAM, budget-ask.Prefetch)), nil
	case ask.RAMSet:
		if need := ask.RAM + minPrefetch + memoryRoom; need > capBytes {
			return 0, 0, fmt.Errorf("--memory-cache-size %s needs %s with the smallest read-ahead budget (%s), over %s",
				formatSize(ask.RAM), formatSize(need), formatSize(minPrefetch), capName)
		}
		return max(min(ask.Prefetch, budget-ask.RAM), minPrefetch), ask.RAM, nil
	}
	if need := minPrefetch + memoryRoom; need > capBytes {
		return 0, 0, fmt.Errorf("%s is too small: the smallest read-ahead budget (%s) and the daemon's %s of room need %s",
			capName, formatSize(minPrefetch), formatSize(memoryRoom), formatSize(need))
	}
	prefetchMemory = max(min(ask.Prefetch, budget/2&^(1<<20-1)), minPrefetch)
	return prefetchMemory, ramTierOf(min(ask.RAM, budget-prefetchMemory)), nil
}

// ramTierOf is a RAM tier of n bytes in whole MiB, or none under minRAMTier.
func ramTierOf(n int64) int64 {
	if n < minRAMTier {
		return 0
	}
	return n &^ (1<<20 - 1)
}

// limitName names a cgroup limit for an error: "768 MiB memory limit of
// cgroup /sys/fs/cgroup/memory/x".
func limitName(l cgroup.Limit) string {
	return fmt.Sprintf("%s memory limit of cgroup %s", formatSize(l.Bytes), l.Dir)
}
