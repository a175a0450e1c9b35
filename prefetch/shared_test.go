package prefetch

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// TestSharedBytesStayPutUntilReleased: a read answered in place keeps its
// part's buffer while the caller holds the bytes, even after the stream
// has read on past it and closed, in a budget so small that every later
// GET reuses a freed buffer; releasing it frees the part's budget.
func TestSharedBytesStayPutUntilReleased(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 4 * cfg.PartSize
	s := newTestEngine(t, cfg, &fakeFetcher{}, nil)
	obj := fakeObject("lent", 64*cfg.PartSize)
	st := s.Open(obj)

	data, _, release, err := st.ReadShared(ctx, make([]byte, 1000), 100)
	if err != nil {
		t.Fatal(err)
	}
	if release == nil {
		t.Fatal("a read inside one part was copied, want its bytes in place")
	}
	want := wantBytes(obj, 100, 1000)
	readAll(ctx, t, st, obj, 3000)
	st.Close()
	if !bytes.Equal(data, want) {
		t.Fatal("bytes lent by ReadShared changed before they were released")
	}
	if in := settledStats(t, s).InUseBytes; in == 0 {
		t.Fatal("the budget of a part whose bytes are lent was freed before release")
	}
	release()
	if in := settledStats(t, s).InUseBytes; in != 0 {
		t.Fatalf("%d bytes of budget in use after the last release, want 0", in)
	}
}

// TestAReadSpanningPartsIsCopied: a read across a part boundary is copied
// into the caller's buffer, with nothing to release.
func TestAReadSpanningPartsIsCopied(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	s := newTestEngine(t, cfg, &fakeFetcher{}, nil)
	obj := fakeObject("span", 8*cfg.PartSize)
	st := s.Open(obj)
	defer st.Close()
	p := make([]byte, cfg.PartSize)
	off := cfg.PartSize / 2
	data, _, release, err := st.ReadShared(ctx, p, off)
	if err != nil {
		t.Fatal(err)
	}
	if release != nil || len(data) == 0 || &data[0] != &p[0] {
		t.Fatal("a read across two parts was answered in place, want it copied into p")
	}
	if !bytes.Equal(data, wantBytes(obj, off, len(p))) {
		t.Fatal("wrong bytes")
	}
}

// TestManyReadersLendingBytesShareATightBudget: many readers answered in
// place, each releasing its bytes once it has used them as a FUSE reply
// does, over a budget of a few parts: all finish with every byte right and
// leave no budget behind.
func TestManyReadersLendingBytesShareATightBudget(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 3 * cfg.PartSize
	s := newTestEngine(t, cfg, &fakeFetcher{}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := range 16 {
		obj := fakeObject(fmt.Sprintf("obj-%d", r%4), 6*cfg.PartSize+123)
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s.Open(obj)
			defer st.Close()
			rnd := rand.New(rand.NewSource(int64(r)))
			for off := int64(0); off < obj.Size; {
				p := make([]byte, 1+rnd.Intn(int(cfg.PartSize)))
				data, _, release, err := st.ReadShared(ctx, p, off)
				ok := bytes.Equal(data, wantBytes(obj, off, len(p)))
				if release != nil {
					release()
				}
				if !ok {
					errs <- fmt.Errorf("%s at %d: wrong bytes (err %v)", obj.Key, off, err)
					return
				}
				off += int64(len(data))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if in := settledStats(t, s).InUseBytes; in != 0 {
		t.Fatalf("%d bytes of budget in use after every stream closed, want 0", in)
	}
}
