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

// slowSink is a cache disk slower than the store: each Put takes delay,
// and none returns before open is closed (nil: open from the start). The
// gate is a channel, not a lock, so that a Put waiting at it is durably
// blocked in a synctest bubble.
type slowSink struct {
	*recordingSink
	delay time.Duration
	open  chan struct{}
}

func (s *slowSink) Put(obj store.Object, index int64, data []byte, place cache.Placement) {
	if s.open != nil {
		<-s.open
	}
	time.Sleep(s.delay)
	s.recordingSink.Put(obj, index, data, place)
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
// hold a sequential reader. Its parts stop waiting for the Sink once half
// the budget does, every byte read is right, and every byte fetched either
// reaches the Sink or is counted as skipped. In a synctest bubble a reader
// held by the Sink is a deadlock that fake time turns into the end of the
// test's context at once, not a wait on the wall clock.
func TestReadAheadSkipsASinkThatStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := lagConfig()
		sink := &slowSink{recordingSink: newRecordingSink(t, cfg.BlockSize), open: make(chan struct{})}
		openSink := sync.OnceFunc(func() { close(sink.open) })
		s := newTestEngine(t, cfg, &fakeFetcher{}, sink)
		t.Cleanup(openSink) // before Close, which waits for the Sink
		obj := fakeObject("stalled", 64*cfg.PartSize)
		r := s.OpenReader(obj, false, 0)
		readThrough(ctx, t, r, obj)
		r.Close()
		openSink()
		st := settledStats(t, s)
		if st.SinkSkippedBytes == 0 {
			t.Fatal("no read-ahead bytes skipped a Sink that took nothing")
		}
		if got := sink.total() + st.SinkSkippedBytes; got != st.FetchedBytes {
			t.Errorf("the Sink got %d bytes and %d were skipped: %d, want the %d fetched", sink.total(), st.SinkSkippedBytes, got, st.FetchedBytes)
		}
		if max := cfg.Memory/sinkLagShare + cfg.PartSize; sink.total() > max {
			t.Errorf("the Sink held %d bytes while it stalled, want at most %d (half the budget and a part)", sink.total(), max)
		}
	})
}

// TestCacheFillerWaitsForASlowSink: with a reader that fills the cache
// open, every fetched block reaches a Sink slower than the store, while
// without one the same read skips it. The test runs in a synctest bubble:
// the Sink's delay is fake time, which passes only while every goroutine
// waits, and the fake store takes none, so the Sink lags the store on
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
				sink := &slowSink{recordingSink: newRecordingSink(t, cfg.BlockSize), delay: 2 * time.Millisecond}
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
					t.Errorf("filling the cache: the Sink got %d of %d bytes, %d skipped", sink.total(), obj.Size, st.SinkSkippedBytes)
				case !fill && st.SinkSkippedBytes == 0:
					t.Errorf("without a filler no byte skipped a Sink taking %v a part", sink.delay)
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
