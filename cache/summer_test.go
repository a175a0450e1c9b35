package cache

import (
	"testing"
)

// advanceInPieces feeds s the bytes of buf[lo:end] as a GET of them
// reports them: pieces of uneven sizes.
func advanceInPieces(s *Summer, buf []byte, lo, end int64) {
	step := int64(1000)
	for hi := lo; hi < end; {
		hi = min(hi+step, end)
		s.Advance(buf, lo, hi)
		step = step*3 + 517
	}
}

// TestSummerSumsAsTheRingDoes: the grain CRCs a Summer makes piece by piece,
// across a head GET and the rest of the part, and over an object's short
// last block, are those the ring computes from the whole block, and the
// chunk CRCs combined from them are too.
func TestSummerSumsAsTheRingDoes(t *testing.T) {
	c := openCache(t, ringConfig(t.TempDir(), 8))
	o := newTestObject("sums/a.tar", 3*testBlock+5000)
	grain := grainSizeFor(testBlock)
	head := int64(6000) // not on a grain boundary: the rest starts inside a grain

	s := c.Summer(o.obj.Size)
	advanceInPieces(s, o.data, 0, head)
	advanceInPieces(s, o.data, head, o.obj.Size)
	for index := int64(0); index*testBlock < o.obj.Size; index++ {
		start := index * testBlock
		size := min(testBlock, o.obj.Size-start)
		wantChunks, wantGrains := sumBlock(o.data[start:start+size], grain)
		grains, ok := s.From(start).block(0, size, grain)
		if !ok {
			t.Fatalf("block %d: no sums from the Summer", index)
		}
		if grains != wantGrains {
			t.Errorf("block %d: grain CRCs differ from the ring's", index)
		}
		if chunksOf(&grains, size, grain) != wantChunks {
			t.Errorf("block %d: chunk CRCs combined from the grains differ from the ring's", index)
		}
	}

	// A part whose first block came from the cache sums from its second.
	late := c.Summer(o.obj.Size)
	advanceInPieces(late, o.data, testBlock, o.obj.Size)
	if _, ok := late.From(0).block(0, testBlock, grain); ok {
		t.Error("sums offered for a block the Summer never saw")
	}
	if _, ok := late.From(testBlock).block(0, testBlock, grain); !ok {
		t.Error("no sums for the first block that arrived")
	}
	if c := openCache(t, Config{MemorySize: 4 * testBlock}); c.Summer(testBlock) != nil {
		t.Error("a cache without a ring made a Summer")
	}
}

// TestKeepWritesTheArrivalSums: the ring writes a kept part's blocks
// under the sums its Summer made, without summing them again; sums that do
// not match the bytes (as a Summer given other bytes would make) make the
// blocks fail their check when read, and are never served.
func TestKeepWritesTheArrivalSums(t *testing.T) {
	o := newTestObject("sums/b.tar", 4*testBlock)
	buf := alignedBuffer(int(o.obj.Size))
	copy(buf, o.data)

	c := openCache(t, ringConfig(t.TempDir(), 8))
	s := c.Summer(o.obj.Size)
	advanceInPieces(s, buf, 0, o.obj.Size)
	c.Keep(o.obj, 1, buf[testBlock:], s.From(testBlock), ForReadAhead, false)
	if st := c.Stats(); st.RingWrites != 3 || st.RingPresummed != 3 {
		t.Fatalf("ring writes %d, of them with the arrival sums %d; want 3 and 3", st.RingWrites, st.RingPresummed)
	}
	mustRead(t, c, o, testBlock, 3*testBlock)

	other := newTestObject("sums/other.tar", 4*testBlock)
	wrong := c.Summer(o.obj.Size)
	advanceInPieces(wrong, other.data, 0, o.obj.Size)
	c2 := openCache(t, ringConfig(t.TempDir(), 8))
	c2.Keep(o.obj, 0, buf, wrong.From(0), ForReadAhead, false)
	p := make([]byte, testBlock)
	if _, ok := c2.ReadAt(o.obj, p, 0, ForReadAhead); ok {
		t.Fatal("a block written under sums of other bytes was served")
	}
	if f := c2.Stats().ChecksumFailures; f == 0 {
		t.Error("a block written under sums of other bytes passed its check")
	}
}
