package arena

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const testBlock = 64 << 10

func openTest(t *testing.T, slots int64) *Arena {
	t.Helper()
	a, err := Open(t.TempDir(), slots*testBlock, testBlock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func mustAlloc(t *testing.T, a *Arena) Ref {
	t.Helper()
	ref, ok := a.Alloc()
	if !ok {
		t.Fatal("no free slot")
	}
	return ref
}

func TestAStaleRefPinsNothing(t *testing.T) {
	a := openTest(t, 1)
	r1 := mustAlloc(t, a)
	a.Release(r1)
	r2 := mustAlloc(t, a)
	if r2.slot != r1.slot {
		t.Fatalf("the one slot was not reused: %+v after %+v", r2, r1)
	}
	if a.Pin(r1) {
		t.Fatal("a ref from before the slot was reused pinned it")
	}
	if !a.Pin(r2) {
		t.Fatal("the live ref did not pin")
	}
	a.Unpin(r2)
}

// A slot released while pinned is free only once the last pin goes, and
// its bytes stay as they were until then.
func TestAPinnedSlotIsNotReused(t *testing.T) {
	a := openTest(t, 1)
	ref := mustAlloc(t, a)
	copy(a.Block(ref, 4), "abcd")
	if !a.Pin(ref) {
		t.Fatal("a live ref did not pin")
	}
	a.Release(ref)
	if _, ok := a.Alloc(); ok || a.Free() != 0 {
		t.Fatalf("a released but pinned slot was handed out again (%d free)", a.Free())
	}
	if got := a.Block(ref, 4); !bytes.Equal(got, []byte("abcd")) {
		t.Fatalf("a pinned slot holds %q, want its own bytes", got)
	}
	a.Unpin(ref)
	if a.Free() != 1 {
		t.Fatalf("%d slots free after the last pin went, want 1", a.Free())
	}
	if a.Pin(ref) {
		t.Fatal("a released ref pinned its slot")
	}
}

// Leases pin at most half the slots, stop at a released ref, and give
// their pins back with UnpinLease.
func TestLeasesPinAtMostHalfTheSlots(t *testing.T) {
	a := openTest(t, 8)
	refs := make([]Ref, 6)
	for i := range refs {
		refs[i] = mustAlloc(t, a)
	}
	got := a.PinLease(refs[:5])
	if len(got) != 4 || a.Leased() != 4 {
		t.Fatalf("a lease of 5 of 8 slots pinned %d (%d leased), want the 4 of half", len(got), a.Leased())
	}
	if more := a.PinLease(refs[5:]); len(more) != 0 {
		t.Fatalf("a lease past half the slots pinned %d", len(more))
	}
	a.UnpinLease(got)
	if a.Leased() != 0 {
		t.Fatalf("%d slots leased after the lease was released", a.Leased())
	}
	a.Release(refs[1])
	if got := a.PinLease(refs[:3]); len(got) != 1 {
		t.Fatalf("a lease over a released slot pinned %d, want the one before it", len(got))
	} else {
		a.UnpinLease(got)
	}
}

// The arena file is private, reserved whole, removed at Close, and a file
// left by a daemon no longer running is removed by the next Open.
func TestTheArenaFileIsPrivateAndGoesAtClose(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, filePrefix+strconv.Itoa(cmd.Process.Pid))
	if err := os.WriteFile(stale, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(dir, 4*testBlock, testBlock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the arena file of a dead daemon is still there: %v", err)
	}
	st, err := os.Stat(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 4*testBlock {
		t.Errorf("arena file mode %v size %d, want 0600 and %d", st.Mode().Perm(), st.Size(), 4*testBlock)
	}
	// A client's mapping sees what the daemon writes into a slot.
	ref := mustAlloc(t, a)
	copy(a.Block(ref, 5), "shard")
	b := make([]byte, 5)
	f, err := os.Open(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(b, a.Offset(ref))
	f.Close()
	if err != nil || string(b) != "shard" {
		t.Errorf("the file holds %q at the slot's offset (%v), want the slot's bytes", b, err)
	}
	a.Close()
	if _, err := os.Stat(a.Path()); !os.IsNotExist(err) {
		t.Errorf("the arena file outlived Close: %v", err)
	}
}

func TestAnArenaThatDoesNotFitFailsTheOpen(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir, 1<<50, 1<<20)
	if !errors.Is(err, ErrSharedMemory) || !strings.Contains(err.Error(), "shared memory cache") {
		t.Fatalf("an arena larger than its filesystem: %v, want ErrSharedMemory", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Fatalf("a failed open left %v", names)
	}
	if _, err := Open(dir, 10, 1<<20); !errors.Is(err, ErrSharedMemory) {
		t.Fatalf("an arena smaller than a block: %v, want ErrSharedMemory", err)
	}
}
