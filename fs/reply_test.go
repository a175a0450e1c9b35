package fs

import (
	"bytes"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// slicer is what go-fuse looks for to write a reply with writev(2) straight
// from the bytes, calling Done only after the write.
type slicer interface {
	Slices() ([][]byte, fuse.Status)
}

func TestLentBytesAreWrittenInPlaceAndReleasedOnce(t *testing.T) {
	data := []byte("shard bytes lent by a prefetch part")
	released := 0
	rr := newReadResult(reply{data: data, release: func() { released++ }})
	s, ok := rr.(slicer)
	if !ok {
		t.Fatal("a reply of lent bytes has no Slices: go-fuse would release them before writing them")
	}
	if bufs, st := s.Slices(); !st.Ok() || len(bufs) != 1 || &bufs[0][0] != &data[0] || rr.Size() != len(data) {
		t.Fatalf("Slices = %d buffers, %v, size %d: want the lent bytes themselves", len(bufs), st, rr.Size())
	}
	// Bytes, which go-fuse follows with Done before it writes, must copy.
	out, _ := rr.Bytes(make([]byte, 0, 64))
	copy(data, "XXXXX")
	if !bytes.Equal(out, []byte("shard bytes lent by a prefetch part")) {
		t.Fatal("Bytes returned the lent bytes, not a copy of them")
	}
	if released != 0 {
		t.Fatal("released before Done")
	}
	rr.Done()
	rr.Done()
	if released != 1 {
		t.Fatalf("released %d times, want once", released)
	}
}

func TestAnEmptyLentReplyIsReleasedAtOnce(t *testing.T) {
	released := 0
	rr := newReadResult(reply{data: nil, release: func() { released++ }})
	if released != 1 || rr.Size() != 0 {
		t.Fatalf("an empty reply: released %d times, size %d; want 1 and 0 (go-fuse skips Done for it)", released, rr.Size())
	}
}
