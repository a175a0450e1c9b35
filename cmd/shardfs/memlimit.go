package main

import (
	"log/slog"
	"runtime/debug"
	"time"
)

// memoryRoom is what the daemon holds beyond part buffers and RAM-tier
// blocks. A full read-ahead budget leaves the collector only this room:
// it runs each time that much is allocated, and each run empties the
// FUSE server's buffer pools, which then allocate afresh. On a 16-core
// node, 4 readers with the ring on filled a 1 GiB budget: 48 MiB of room
// made 283 collections in a 3 s read and 1.9-2.2 daemon CPU-s per GB;
// 128 MiB, 0.9-1.1 under a 1 GiB or a 512 MiB budget (64 MiB under
// 512 MiB: 0.9-2.2). docs/BENCHMARKS.md.
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
// counted it let freed part buffers pile up (peak RSS 1,175 MiB under a
// 1 GiB budget; docs/BENCHMARKS.md). The returned stop ends the goroutine
// that follows it.
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
