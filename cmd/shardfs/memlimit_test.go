package main

import (
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The limit follows what the RAM tier holds at each tick, and stays where
// it is once stopped. The follower runs in a synctest bubble: its ticker
// fires when the test lets the bubble's clock reach a tick, and
// synctest.Wait returns once it has set the limit and waits again.
func TestMemoryLimitFollowsWhatTheRAMTierHolds(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	synctest.Test(t, func(t *testing.T) {
		var ram atomic.Int64
		stop := sync.OnceFunc(followMemoryLimit(256<<20, ram.Load, slog.New(slog.NewTextHandler(io.Discard, nil))))
		defer stop() // a failed check must not leave the follower to outlive the bubble
		if got, want := debug.SetMemoryLimit(-1), int64(256<<20+memoryRoom); got != want {
			t.Fatalf("limit with an empty RAM tier: %d, want the budget plus room, %d", got, want)
		}
		ram.Store(1 << 30)
		want := int64(256<<20 + 1<<30 + memoryRoom)
		time.Sleep(memoryLimitEvery)
		synctest.Wait()
		if got := debug.SetMemoryLimit(-1); got != want {
			t.Fatalf("limit %d a tick after the RAM tier filled, want %d", got, want)
		}
		stop()
		ram.Store(0)
		time.Sleep(2 * memoryLimitEvery)
		synctest.Wait()
		if got := debug.SetMemoryLimit(-1); got != want {
			t.Fatalf("limit moved to %d after stop", got)
		}
	})
}
