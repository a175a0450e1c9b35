package prefetch

import (
	"os"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAFaultingCopyLeavesNoPin: a read whose destination faults (a GPU
// client's shared mapping truncated under its READ, recovered by the
// caller) must unpin its part, or the part's budget is never returned and,
// after enough faults, every uncached read waits for ever.
func TestAFaultingCopyLeavesNoPin(t *testing.T) {
	ctx := testContext(t)
	cfg := smallConfig()
	cfg.Memory = 2 * cfg.PartSize
	s := newTestEngine(t, cfg, &fakeFetcher{}, nil)
	obj := fakeObject("faulting", 8*cfg.PartSize)

	f, err := os.CreateTemp("/dev/shm", "shardfs-prefetch-test-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n := int(cfg.PartSize)
	if err := f.Truncate(int64(n)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}

	for i := range 8 { // more faults than the budget has parts
		st := s.Open(obj)
		faulted := func() (faulted bool) {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() { faulted = recover() != nil }()
			st.ReadAt(ctx, mem[:n/2], int64(i)*cfg.PartSize)
			return false
		}()
		st.Close()
		if !faulted {
			t.Fatalf("read %d into a truncated mapping did not fault", i)
		}
	}
	if pins := settledStats(t, s).ReadPins; pins != 0 {
		t.Fatalf("%d read pins left after faulting reads", pins)
	}
	if in := settledStats(t, s).InUseBytes; in != 0 {
		t.Fatalf("%d bytes of budget still in use after faulting reads closed, want 0", in)
	}
	st := s.Open(obj)
	defer st.Close()
	readAll(ctx, t, st, obj, 3000)
}
