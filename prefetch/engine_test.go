package prefetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

// smallConfig scales the defaults down so tests move many parts quickly.
func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.BlockSize, cfg.PartSize, cfg.MaxPrefetch = 4<<10, 16<<10, 64<<10
	cfg.Memory, cfg.Concurrency, cfg.ReorderWindow = 256<<10, 8, 32<<10
	// Tests that count what reaches the cache must not depend on how fast
	// it takes it; sinklag_test.go turns the skip on.
	cfg.SkipLaggingSink = false
	return cfg
}

// testContext bounds a test's reads so a hang fails rather than stalls: a
// guard, not a measure of speed. In a synctest bubble its clock is the
// bubble's, which reaches the deadline only once every goroutine has
// waited that long, that is on a deadlock.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newTestEngine starts an engine that the test closes, and checks on
// cleanup that no GET outlives Close.
func newTestEngine(t *testing.T, cfg Config, f Fetcher, c Cache) *Engine {
	s := NewEngine(cfg, f, c, nil)
	t.Cleanup(func() {
		s.Close()
		if ff, ok := f.(*fakeFetcher); ok && ff.running() != 0 {
			t.Errorf("%d GETs still running after Close", ff.running())
		}
	})
	return s
}

func TestSequentialReadServesEveryByteAndFetchesEachOnce(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	mem := storetest.NewMem()
	data := make([]byte, 300<<10+123)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	mem.Put("shard-0.tar", data)
	obj, err := mem.Stat(ctx, "shard-0.tar")
	if err != nil {
		t.Fatal(err)
	}
	sink := newRecordingCache(t, cfg.BlockSize)
	sink.content = func(_ store.Object, off int64, n int) []byte { return data[off : off+int64(n)] }
	s := newTestEngine(t, cfg, mem, sink)
	st := s.Open(obj)
	defer st.Close()

	got := make([]byte, 0, len(data))
	buf := make([]byte, 10000)
	for off := int64(0); ; {
		n, err := st.ReadAt(ctx, buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != string(data) {
		t.Fatal("sequential read returned wrong bytes")
	}
	if n := mem.ReadBytes.Load(); n != int64(len(data)) {
		t.Errorf("fetched %d bytes from the store for a %d-byte object", n, len(data))
	}
	stats := s.Stats()
	if stats.PrefetchedServedBytes < int64(len(data))/2 {
		t.Errorf("only %d of %d bytes came from read-ahead", stats.PrefetchedServedBytes, len(data))
	}
	s.Close() // waits for the last Keep calls, which follow the reads
	if sink.total() != int64(len(data)) {
		t.Errorf("sink received %d bytes, want %d", sink.total(), len(data))
	}
}

func TestRandomSmallReadsFetchAtMostTwoBlocksEach(t *testing.T) {
	ctx := testContext(t)
	cfg := DefaultConfig() // 1 MiB blocks, 8 MiB parts
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("big.tar", 1<<30)
	st := s.Open(obj)
	defer st.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	const reads = 300
	buf := make([]byte, 4096)
	for range reads {
		if err := readCheck(ctx, st, obj, buf, rng.Int64N(obj.Size-4096)); err != nil {
			t.Fatal(err)
		}
	}
	settledStats(t, s) // every GET the reads started has asked
	if asked, limit := f.askedBytes.Load(), int64(reads)*2*cfg.BlockSize; asked > limit {
		t.Fatalf("%d random 4 KiB reads asked the store for %d bytes, more than 2 blocks each (%d)", reads, asked, limit)
	}
}

// throughPartsCache is a recordingCache that objects up to size fit in, so
// that random reads of them are served through parts as sequential ones
// are: none is exact (exact.go). cfg's density rule, which a cache with
// no room never lets fire (dense.go), is turned off: no object gets parts
// of its own rest.
func throughPartsCache(t *testing.T, cfg *Config, size int64) *recordingCache {
	cfg.DenseRandom = false
	sink := newRecordingCache(t, cfg.BlockSize)
	sink.room = size
	return sink
}

func TestInterleavedSequentialAndRandomReadersOnOneObject(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	f := &fakeFetcher{}
	obj := fakeObject("mixed.tar", 1<<20+777)
	sink := throughPartsCache(t, &cfg, obj.Size)
	s := newTestEngine(t, cfg, f, sink)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			st := s.Open(obj)
			defer st.Close()
			readAll(ctx, t, st, obj, 3000+i*1000)
		})
		wg.Go(func() {
			st := s.Open(obj)
			defer st.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			buf := make([]byte, 5000)
			for range 200 {
				if err := readCheck(ctx, st, obj, buf, rng.Int64N(obj.Size)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := s.Stats().ExactReads; n != 0 {
		t.Errorf("%d random reads fetched exactly, want every one through parts", n)
	}
}

// TestManyStreamsOverFewObjects runs 64 concurrent handles over 16 objects
// with a budget far smaller than what they would read ahead: every byte
// must be right, the budget never exceeded, and nothing left held.
func TestManyStreamsOverFewObjects(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 128 << 10
	f := &fakeFetcher{}
	objs := make([]store.Object, 16)
	for i := range objs {
		objs[i] = fakeObject(fmt.Sprintf("shard-%02d.tar", i), int64(100<<10+i*4099))
	}
	sink := throughPartsCache(t, &cfg, objs[len(objs)-1].Size)
	s := newTestEngine(t, cfg, f, sink)
	s.SetOrder(objs)
	var wg sync.WaitGroup
	for i := range 64 {
		obj := objs[i%len(objs)]
		wg.Go(func() {
			st := s.Open(obj)
			defer st.Close()
			if i%4 == 3 {
				rng := rand.New(rand.NewPCG(uint64(i), 10))
				buf := make([]byte, 4096)
				for range 50 {
					if err := readCheck(ctx, st, obj, buf, rng.Int64N(obj.Size)); err != nil {
						t.Error(err)
						return
					}
				}
				return
			}
			readAll(ctx, t, st, obj, 1000+i*100)
		})
	}
	wg.Wait()
	stats := s.Stats()
	if stats.PeakInUseBytes > cfg.Memory || f.peak() > cfg.Memory {
		t.Errorf("budget %d exceeded: peak charged %d, peak in flight at the store %d", cfg.Memory, stats.PeakInUseBytes, f.peak())
	}
	if stats.Errors != 0 {
		t.Errorf("%d GETs failed", stats.Errors)
	}
	if stats.Streams != 0 {
		t.Errorf("%d streams still open", stats.Streams)
	}
	if stats.ExactReads != 0 {
		t.Errorf("%d random reads fetched exactly, want every one through parts", stats.ExactReads)
	}
}

// TestBudgetFullMeansWaitNotError: with a budget of one part and that part
// held by a GET that has not answered, a second reader waits; when the GET
// answers both reads succeed.
func TestBudgetFullMeansWaitNotError(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = cfg.PartSize
	f := &fakeFetcher{hold: make(chan struct{}), started: make(chan string, 100)}
	s := newTestEngine(t, cfg, f, nil)
	waiting := make(chan struct{}, 10)
	s.onBudgetWait = func() { waiting <- struct{}{} }
	a, b := fakeObject("a", 1<<20), fakeObject("b", 1<<20)
	sa, sb := s.Open(a), s.Open(b)
	defer sa.Close()
	defer sb.Close()

	errs := make(chan error, 2)
	go func() { errs <- readCheck(ctx, sa, a, make([]byte, cfg.PartSize), 0) }()
	<-f.started // a's part holds the whole budget and has not answered
	go func() { errs <- readCheck(ctx, sb, b, make([]byte, cfg.BlockSize), 0) }()
	<-waiting // b waits for budget instead of failing
	close(f.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if stats := s.Stats(); stats.BudgetWaits == 0 || stats.PeakInUseBytes > cfg.Memory {
		t.Fatalf("budget waits %d, peak %d of %d", stats.BudgetWaits, stats.PeakInUseBytes, cfg.Memory)
	}
}

// TestTinyBudgetManyReaders: a budget of one part shared by 16 readers of
// whole objects: everything is read correctly, nothing fails.
func TestTinyBudgetManyReaders(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = cfg.PartSize
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		obj := fakeObject(fmt.Sprintf("o%d", i), 200<<10+int64(i))
		wg.Go(func() {
			st := s.Open(obj)
			defer st.Close()
			readAll(ctx, t, st, obj, 7000)
		})
	}
	wg.Wait()
	if peak := f.peak(); peak > cfg.Memory {
		t.Fatalf("%d bytes in flight at once, budget %d", peak, cfg.Memory)
	}
}

// TestTwoStreamsShareOneGET: two handles reading the same bytes share one
// GET, and the first closing does not cancel what the second waits for.
func TestTwoStreamsShareOneGET(t *testing.T) {
	ctx := testContext(t)
	f := &fakeFetcher{hold: make(chan struct{}), started: make(chan string, 100)}
	s := newTestEngine(t, smallConfig(), f, nil)
	partWaits := make(chan struct{}, 10)
	s.onPartWait = func() { partWaits <- struct{}{} }
	obj := fakeObject("shared", 1<<20)
	s1, s2 := s.Open(obj), s.Open(obj)
	defer s2.Close()
	errs := make(chan error, 2)
	go func() { errs <- readCheck(ctx, s1, obj, make([]byte, 100), 0) }()
	<-f.started
	<-partWaits
	go func() { errs <- readCheck(ctx, s2, obj, make([]byte, 100), 50) }()
	<-partWaits // s2 waits on s1's GET
	s1.Close()
	close(f.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// One GET: the part survived s1's Close because s2 waited on it.
	if n := f.getsAt("shared", 0); n != 1 {
		t.Fatalf("%d GETs at offset 0 for two streams, want 1", n)
	}
}

// TestCloseCancelsFetchesAndStopsEverything: Close cancels every GET,
// fails every read waiting on one with ErrClosed, and leaves no goroutine
// behind; a read after Close fails with ErrClosed. The test runs in a
// synctest bubble: synctest.Wait returns once the readers' goroutines have
// exited, so that the goroutines left are counted without polling.
func TestCloseCancelsFetchesAndStopsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		before := bubbleGoroutines(t)
		cfg := smallConfig()
		f := &fakeFetcher{hold: make(chan struct{}), started: make(chan string, 1000)}
		s := NewEngine(cfg, f, nil, nil)
		errs := make(chan error, 8)
		for i := range 8 {
			obj := fakeObject(fmt.Sprintf("o%d", i), 1<<20)
			st := s.Open(obj)
			go func() {
				_, err := st.ReadAt(ctx, make([]byte, 64<<10), 0)
				errs <- err
			}()
		}
		for range 8 {
			<-f.started
		}
		s.Close()
		for range 8 {
			if err := <-errs; !errors.Is(err, ErrClosed) {
				t.Fatalf("read during Close returned %v, want ErrClosed", err)
			}
		}
		if f.running() != 0 {
			t.Fatalf("%d GETs still running after Close", f.running())
		}
		if f.cancelled.Load() == 0 {
			t.Fatal("no GET saw its context cancelled")
		}
		st := s.Open(fakeObject("late", 10))
		if _, err := st.ReadAt(ctx, make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("read after Close returned %v, want ErrClosed", err)
		}
		st.Close()
		synctest.Wait()
		if n := bubbleGoroutines(t); n > before {
			t.Fatalf("%d goroutines after Close and the reads it failed, %d before the engine started", n, before)
		}
	})
}

func TestStreamCloseCancelsItsReadAheadAndFreesBudget(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 4 * cfg.PartSize
	const answered = 64 << 10 // GETs of a past this never answer
	f := &fakeFetcher{hold: make(chan struct{}), holdIf: func(o store.Object, off int64) bool {
		return o.Key == "a" && off >= answered
	}}
	s := newTestEngine(t, cfg, f, nil)
	a := fakeObject("a", 4<<20)
	sa := s.Open(a)
	readAll(ctx, t, sa, fakeObject("a", answered), 4096)
	if s.Stats().InUseBytes == 0 {
		t.Fatal("no read-ahead in flight after a sequential run")
	}
	sa.Close()
	if s.Stats().Cancelled == 0 {
		t.Fatal("closing the stream cancelled none of its parts")
	}
	// The whole budget comes back once the cancelled GETs return: another
	// stream can read the budget's worth at once.
	b := fakeObject("b", 1<<20)
	sb := s.Open(b)
	defer sb.Close()
	if err := readCheck(ctx, sb, b, make([]byte, cfg.Memory), 0); err != nil {
		t.Fatal(err)
	}
}

func TestFetchErrorsSurfaceWrapped(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	mem := storetest.NewMem()
	mem.Put("a", make([]byte, 100<<10))
	obj, _ := mem.Stat(ctx, "a")
	mem.Put("a", []byte("a different version"))
	s := newTestEngine(t, cfg, mem, nil)
	st := s.Open(obj)
	if _, err := st.ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("read of a changed object: %v, want store.ErrChanged", err)
	}
	st.Close()
}

// TestAFailedRangeGetsOneAttempt: through the store's retry wrapper, a
// read whose GET failed after the whole retry budget is read again (the
// kernel's re-read of a failed page) with one attempt: while the store is
// still failing, the error comes at once, with no backoff; once the store
// answers, the read gets every byte at once. After failedRangeMemory the
// range has the whole budget again.
func TestAFailedRangeGetsOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := smallConfig()
		cfg.HeadSize = 0
		const budget = 20 * time.Second
		mem := storetest.NewMem()
		data := make([]byte, cfg.BlockSize) // one part: no read-ahead
		fillPattern(data, fakeObject("b", int64(len(data))), 0)
		mem.Put("b", data)
		flaky := errors.New("connection refused")
		var failing atomic.Bool
		var attempts atomic.Int64
		mem.Hook = func(string, int64, int) error {
			attempts.Add(1)
			if failing.Load() {
				return flaky
			}
			return nil
		}
		policy := store.RetryPolicy{Attempts: 1000, BaseDelay: time.Second, MaxDelay: time.Second, Budget: budget}
		retry := store.WithRetry(mem, policy, slog.New(slog.DiscardHandler))
		obj, err := retry.Stat(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		s := newTestEngine(t, cfg, retry, nil)
		read := func() (time.Duration, error) {
			st := s.Open(obj)
			defer st.Close()
			start := time.Now()
			got := make([]byte, cfg.BlockSize)
			n, err := st.ReadAt(ctx, got, 0)
			if err == nil && !bytes.Equal(got[:n], data[:n]) {
				t.Fatal("wrong bytes")
			}
			return time.Since(start), err
		}

		failing.Store(true)
		if took, err := read(); !errors.Is(err, flaky) || took < budget {
			t.Fatalf("first read: %v after %v, want the store's error after the %v budget", err, took, budget)
		}
		settledStats(t, s)
		before := attempts.Load()
		if took, err := read(); !errors.Is(err, flaky) || took != 0 {
			t.Fatalf("read of a range that just failed: %v after %v, want the error at once", err, took)
		}
		if n := attempts.Load() - before; n != 1 {
			t.Fatalf("%d attempts for a read of a range that just failed, want 1", n)
		}
		failing.Store(false)
		if took, err := read(); err != nil || took != 0 {
			t.Fatalf("read once the store answers: %v after %v, want every byte at once", err, took)
		}

		failing.Store(true)
		settledStats(t, s)
		time.Sleep(failedRangeMemory)
		if took, err := read(); !errors.Is(err, flaky) || took < budget {
			t.Fatalf("read after failedRangeMemory: %v after %v, want the whole %v budget again", err, took, budget)
		}
	})
}

func TestReadAtEdges(t *testing.T) {
	ctx := testContext(t)
	s := newTestEngine(t, smallConfig(), &fakeFetcher{}, nil)
	obj := fakeObject("edge", 10000)
	st := s.Open(obj)
	defer st.Close()
	if n, err := st.ReadAt(ctx, make([]byte, 10), 10000); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v; want 0, io.EOF", n, err)
	}
	if n, err := st.ReadAt(ctx, nil, 5); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
	if _, err := st.ReadAt(ctx, make([]byte, 1), -1); !errors.Is(err, store.ErrInvalidRange) {
		t.Fatalf("negative offset: %v", err)
	}
	if err := readCheck(ctx, st, obj, make([]byte, 5000), 9000); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := st.ReadAt(ctx, make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read on a closed stream: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	f := &fakeFetcher{hold: make(chan struct{})}
	s2 := newTestEngine(t, smallConfig(), f, nil)
	st2 := s2.Open(obj)
	defer st2.Close()
	if _, err := st2.ReadAt(cancelled, make([]byte, 1), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v", err)
	}
}

// TestNoReadAheadOverAFailedRange: read-ahead whose GET failed is not made
// again over that range while it is remembered (the readers of it fetch
// it, or fail, themselves), and is once failedRangeMemory has passed.
func TestNoReadAheadOverAFailedRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := smallConfig()
		cfg.HeadSize = 0
		bs := cfg.BlockSize
		f := &fakeFetcher{fail: func(_ store.Object, off int64) error {
			if off >= bs {
				return errors.New("connection reset")
			}
			return nil
		}}
		s := newTestEngine(t, cfg, f, nil)
		obj := fakeObject("ahead", 4*bs)
		read := func() {
			st := s.Open(obj)
			defer st.Close()
			if err := readCheck(ctx, st, obj, make([]byte, bs), 0); err != nil {
				t.Fatal(err)
			}
			settledStats(t, s)
		}
		read()
		if n := f.getsAt(obj.Key, bs); n != 1 {
			t.Fatalf("the first read's read-ahead fetched block 1 %d times, want once", n)
		}
		read()
		if n := f.getsAt(obj.Key, bs); n != 1 {
			t.Fatalf("read-ahead over block 1, whose GET just failed, was made again (%d GETs)", n)
		}
		time.Sleep(failedRangeMemory)
		read()
		if n := f.getsAt(obj.Key, bs); n != 2 {
			t.Fatalf("read-ahead over block 1 once failedRangeMemory passed: %d GETs in all, want 2", n)
		}
	})
}

// Read-ahead a reader never reached is counted as unread, by purpose, once
// its parts are let go: every byte fetched is either served or unread.
func TestUnreadCountsFetchedBytesNoReadTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := smallConfig()
		mem := storetest.NewMem()
		data := bytes.Repeat([]byte("shard"), 60<<10)
		mem.Put("shard-0.tar", data)
		obj, err := mem.Stat(ctx, "shard-0.tar")
		if err != nil {
			t.Fatal(err)
		}
		s := newTestEngine(t, cfg, mem, nil)
		st := s.Open(obj)
		buf := make([]byte, 8<<10)
		for off := int64(0); off < 64<<10; off += int64(len(buf)) {
			if _, err := st.ReadAt(ctx, buf, off); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the window's GETs are over
		st.Close()
		synctest.Wait()
		stats := s.Stats()
		var unread int64
		for _, n := range stats.Unread {
			unread += n
		}
		if stats.Unread[forWindow] == 0 {
			t.Errorf("unread by purpose %v: nothing counted for the window read ahead of a reader that stopped at 64 KiB of %d", stats.Unread, len(data))
		}
		if stats.FetchedBytes != stats.ServedBytes+unread {
			t.Errorf("fetched %d bytes, served %d, counted unread %d: want fetched = served + unread", stats.FetchedBytes, stats.ServedBytes, unread)
		}
	})
}
