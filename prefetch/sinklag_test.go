package prefetch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// slowCache is a cache disk slower than the store: each Keep takes delay,
// and none returns before open is closed (nil: open from the start). The
// gate is a channel, not a lock, so that a Keep waiting at it is durably
// blocked in a synctest bubble.
type slowCache struct {
	*recordingCache
	delay time.Duration
	open  chan struct{}
}

func (s *slowCache) Keep(obj store.Object, index int64, data []byte, sums cache.Sums, place cache.Placement, own bool) bool {
	if s.open != nil {
		<-s.open
	}
	time.Sleep(s.delay)
	return s.recordingCache.Keep(obj, index, data, sums, place, own)
}

func lagConfig() Config {
	cfg := smallConfig()
	cfg.SkipLaggingSink = true
	return cfg
}

// readThrough reads obj whole through a reader in 4 KiB reads and fails
// the test on any wrong byte, or on a read still waiting when ctx ends.
func readThrough(ctx context.Context, t *testing.T, r *Reader, obj store.Object) {
	t.Helper()
	buf := make([]byte, 4096)
	for off := int64(0); off < obj.Size; off += int64(len(buf)) {
		n, _, err := r.ReadAt(ctx, buf, off)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			t.Fatalf("read %s at %d held until the test's context ended: %v", obj.Key, off, err)
		}
		if err != nil || n != len(buf) {
			t.Fatalf("read %s at %d: %d bytes, err %v", obj.Key, off, n, err)
		}
		if want := wantBytes(obj, off, n); string(buf[:n]) != string(want) {
			t.Fatalf("read %s at %d: wrong bytes", obj.Key, off)
		}
	}
}

// TestReadAheadSkipsASinkThatStalls: a cache that takes nothing does not
// hold a sequential reader. Its parts stop waiting for the cache once half
// the budget does, every byte read is right, and every byte fetched either
// reaches the cache or is counted as skipped. In a synctest bubble a reader
// held by the cache is a deadlock that fake time turns into the end of the
// test's context at once, not a wait on the wall clock.
func TestReadAheadSkipsASinkThatStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := lagConfig()
		sink := &slowCache{recordingCache: newRecordingCache(t, cfg.BlockSize), open: make(chan struct{})}
		openSink := sync.OnceFunc(func() { close(sink.open) })
		s := newTestEngine(t, cfg, &fakeFetcher{}, sink)
		t.Cleanup(openSink) // before Close, which waits for the cache
		obj := fakeObject("stalled", 64*cfg.PartSize)
		r := s.OpenReader(obj, false, 0)
		readThrough(ctx, t, r, obj)
		r.Close()
		openSink()
		st := settledStats(t, s)
		if st.SinkSkippedBytes == 0 {
			t.Fatal("no read-ahead bytes skipped a cache that took nothing")
		}
		if got := sink.total() + st.SinkSkippedBytes; got != st.FetchedBytes {
			t.Errorf("the cache got %d bytes and %d were skipped: %d, want the %d fetched", sink.total(), st.SinkSkippedBytes, got, st.FetchedBytes)
		}
		if max := cfg.Memory/sinkLagShare + cfg.PartSize; sink.total() > max {
			t.Errorf("the cache held %d bytes while it stalled, want at most %d (half the budget and a part)", sink.total(), max)
		}
	})
}

// TestCacheFillerWaitsForASlowSink: with a reader that fills the cache
// open, every fetched block reaches a cache slower than the store, while
// without one the same read skips it. The test runs in a synctest bubble:
// the cache's delay is fake time, which passes only while every goroutine
// waits, and the fake store takes none, so the cache lags the store on
// every run, however fast or loaded the machine.
func TestCacheFillerWaitsForASlowSink(t *testing.T) {
	for _, fill := range []bool{false, true} {
		name := "without a filler"
		if fill {
			name = "with a filler"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := testContext(t)
				cfg := lagConfig()
				sink := &slowCache{recordingCache: newRecordingCache(t, cfg.BlockSize), delay: 2 * time.Millisecond}
				s := newTestEngine(t, cfg, &fakeFetcher{}, sink)
				obj := fakeObject("slow", 32*cfg.PartSize)
				r := s.OpenReader(obj, false, 0)
				if fill {
					r.FillCache()
				}
				readThrough(ctx, t, r, obj)
				r.Close()
				st := settledStats(t, s)
				switch {
				case fill && (st.SinkSkippedBytes != 0 || sink.total() != obj.Size):
					t.Errorf("filling the cache: it got %d of %d bytes, %d skipped", sink.total(), obj.Size, st.SinkSkippedBytes)
				case !fill && st.SinkSkippedBytes == 0:
					t.Errorf("without a filler no byte skipped a cache taking %v a part", sink.delay)
				}
				s.mu.Lock()
				fillers := s.gets.fillers
				s.mu.Unlock()
				if fillers != 0 {
					t.Errorf("%d fillers counted after the reader closed", fillers)
				}
			})
		})
	}
}
