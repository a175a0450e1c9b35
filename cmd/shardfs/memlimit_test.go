package main

import (
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

func TestMemoryLimitFollowsWhatTheRAMTierHolds(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	var ram atomic.Int64
	stop := followMemoryLimit(256<<20, ram.Load, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if got, want := debug.SetMemoryLimit(-1), int64(256<<20+memoryRoom); got != want {
		t.Fatalf("limit with an empty RAM tier: %d, want the budget plus room, %d", got, want)
	}
	ram.Store(1 << 30)
	want := int64(256<<20 + 1<<30 + memoryRoom)
	deadline := time.Now().Add(20 * memoryLimitEvery)
	for debug.SetMemoryLimit(-1) != want {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d after the RAM tier filled, want %d", debug.SetMemoryLimit(-1), want)
		}
		time.Sleep(memoryLimitEvery / 4)
	}
	stop()
	ram.Store(0)
	time.Sleep(2 * memoryLimitEvery)
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("limit moved to %d after stop", got)
	}
}
