package prefetch

import (
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/store"
)

// headConfig is smallConfig with a head GET of 1 KiB: parts of 4-16 KiB.
func headConfig() Config {
	cfg := smallConfig()
	cfg.HeadSize = 1 << 10
	return cfg
}

func TestAFirstSmallReadThenCloseCostsOneSmallGET(t *testing.T) {
	ctx := testContext(t)
	cfg := headConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("peek", 64<<10)
	st := s.Open(obj)
	if err := readCheck(ctx, st, obj, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	// The head is in and the read answered; nothing else may start until
	// the stream reads again.
	settledStats(t, s)
	st.Close()
	s.Close()
	if n, asked := f.gets.Load(), f.askedBytes.Load(); n != 1 || asked != cfg.HeadSize {
		t.Fatalf("a 512-byte read and close made %d GETs for %d bytes, want 1 GET of %d", n, asked, cfg.HeadSize)
	}
}

func TestTheNextReadFetchesTheRestOfTheHeadPart(t *testing.T) {
	ctx := testContext(t)
	cfg := headConfig()
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("stream", 64<<10+77)
	st := s.Open(obj)
	defer st.Close()
	if err := readCheck(ctx, st, obj, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	settledStats(t, s)
	// Past the head: the read that needs the rest of the part gets it.
	if err := readCheck(ctx, st, obj, make([]byte, 2<<10), 512); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3000)
	for off := int64(512 + 2<<10); off < obj.Size; off += int64(len(buf)) {
		if err := readCheck(ctx, st, obj, buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if f.getsAt("stream", 0) != 1 || f.getsAt("stream", cfg.HeadSize) != 1 {
		t.Fatalf("GETs at 0 and at the head's end: %d and %d, want 1 each", f.getsAt("stream", 0), f.getsAt("stream", cfg.HeadSize))
	}
	if got := settledStats(t, s).FetchedBytes; got != obj.Size {
		t.Fatalf("fetched %d bytes reading %d once", got, obj.Size)
	}
}

// TestAReadPastTheHeadDuringItsGETDoesNotWaitForAnotherRead: a read that
// wants bytes past a head while the head's GET runs gets them without a
// further read of the object. The test runs in a synctest bubble, so that
// both reads are made, and wait, before the head's GET answers.
func TestAReadPastTheHeadDuringItsGETDoesNotWaitForAnotherRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := headConfig()
		f := &fakeFetcher{hold: make(chan struct{}), holdIf: func(_ store.Object, off int64) bool { return off == 0 }}
		s := newTestEngine(t, cfg, f, nil)
		obj := fakeObject("both", 16<<10)
		st := s.Open(obj)
		defer st.Close()

		first := make(chan error, 1)
		go func() { first <- readCheck(ctx, st, obj, make([]byte, 100), 0) }()
		synctest.Wait()
		if n := f.gets.Load(); n != 1 {
			t.Fatalf("%d GETs while the first read waits on its head, want 1", n)
		}
		// A second read (the kernel's read-ahead) arrives while the head
		// GET runs and wants bytes past it: the rest must follow the head
		// without a third read.
		second := make(chan error, 1)
		go func() { second <- readCheck(ctx, st, obj, make([]byte, 2<<10), 2<<10) }()
		synctest.Wait()
		if n := readsOf(s, obj); n != 2 {
			t.Fatalf("%d reads of the object recorded while both wait, want 2", n)
		}
		close(f.hold)
		for _, c := range []chan error{first, second} {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// readsOf is how many reads the engine has recorded on obj.
func readsOf(s *Engine, obj store.Object) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.parts.find(obj); o != nil {
		return o.reads
	}
	return 0
}

func TestStreamsWaitingAfterTheirHeadHoldNoGETSlot(t *testing.T) {
	ctx := testContext(t)
	cfg := headConfig()
	cfg.Concurrency = 2
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	// More streams than GET slots read a few bytes and stay open.
	for i := range 2 * cfg.Concurrency {
		obj := fakeObject(string(rune('a'+i)), 32<<10)
		st := s.Open(obj)
		defer st.Close()
		if err := readCheck(ctx, st, obj, make([]byte, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	settledStats(t, s)
	obj := fakeObject("whole", 100<<10)
	st := s.Open(obj)
	defer st.Close()
	readAll(ctx, t, st, obj, 4<<10)
}

func TestHeadsOffFetchTheWholePartAtOnce(t *testing.T) {
	ctx := testContext(t)
	cfg := headConfig()
	cfg.HeadSize = 0
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("plain", 64<<10)
	st := s.Open(obj)
	defer st.Close()
	if err := readCheck(ctx, st, obj, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	if got := settledStats(t, s).FetchedBytes; got < cfg.BlockSize {
		t.Fatalf("fetched %d bytes for the first read, want at least its block of %d", got, cfg.BlockSize)
	}
}

// A read that counted itself as the object's next read before a small read
// made a head part over the same bytes (it waited for budget in between)
// and then pins that part gets the part's rest: the rest must not park
// waiting for a read that has already come. Made in a synctest bubble, so
// that the pin lands while the head's GET is held.
func TestAReadPinnedOnAHeadPartMadeAfterItGetsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testContext(t)
		cfg := headConfig()
		f := &fakeFetcher{hold: make(chan struct{}), holdIf: func(_ store.Object, off int64) bool { return off == 0 }}
		s := newTestEngine(t, cfg, f, nil)
		obj := fakeObject("counted", 16<<10)
		st := s.Open(obj)
		defer st.Close()
		small := make(chan error, 1)
		go func() { small <- readCheck(ctx, st, obj, make([]byte, 512), 0) }()
		synctest.Wait() // the small read made the part; its head GET is held
		big := make(chan error, 1)
		go func() {
			// The larger read's applyLocked ran before the part existed:
			// it pins the part without counting again.
			p, err := st.pin(ctx, 0, 4<<10, 4<<10, false)
			if err != nil {
				big <- err
				return
			}
			_, _, err = st.serve(ctx, p, 0, 4<<10, false, make([]byte, 4<<10))
			big <- err
		}()
		synctest.Wait()
		f.hold <- struct{}{} // the head answers
		if err := <-small; err != nil {
			t.Fatal(err)
		}
		if err := <-big; err != nil {
			t.Fatalf("a read pinned on a head part made after it counted itself: %v; want the part's rest fetched", err)
		}
	})
}
