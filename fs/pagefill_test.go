package fs

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// fakeLender lends blocks of content in blocks of bs, for random reads
// only (random), and the blocks listed in cached. A read names its block
// when it is small (fakeSmallReads of it in a block), and the blocks of
// chunk [first, first+count) when it lands there, whatever its size, as
// prefetch's Reader does.
type fakeLender struct {
	content []byte
	bs      int64
	random  bool
	cached  map[int64]bool
	chunk   [2]int64
}

const fakeSmallReads = 8

func (l *fakeLender) KeepsPages() {}
func (l *fakeLender) FillRange(off int64, n int) (int64, int64) {
	switch first, count := l.chunk[0], l.chunk[1]; {
	case !l.random:
		return 0, 0
	case off/l.bs >= first && off/l.bs < first+count:
		return first, count
	case int64(n)*fakeSmallReads > l.bs:
		return 0, 0
	}
	return off / l.bs, 1
}
func (l *fakeLender) BlockSize() int64 { return l.bs }
func (l *fakeLender) LendBlock(index int64, buf []byte) (int64, []byte, bool) {
	if !l.cached[index] {
		return 0, nil, false
	}
	start := index * l.bs
	n := copy(buf, l.content[start:min(start+l.bs, int64(len(l.content)))])
	return start, buf[:n], true
}

// storedPage is one fill as the kernel would have received it.
type storedPage struct {
	off  int64
	data []byte
}

func (s storedPage) String() string { return fmt.Sprintf("%q at %d", s.data, s.off) }

func recordingFiller() (*pageFiller, func() []storedPage) {
	p := newPageFiller()
	var mu sync.Mutex
	var got []storedPage
	p.store = func(_ *fileNode, off int64, data []byte) syscall.Errno {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, storedPage{off, bytes.Clone(data)})
		return 0
	}
	return p, func() []storedPage {
		p.wait()
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
}

// A random small read's block is handed over whole, at its offset, once
// while the inode is open; for a read larger than an eighth of a block, a
// sequential reader's read and a block the cache does not hold, nothing
// is; the last release forgets what was handed over.
func TestAFillHandsTheWholeBlockOnce(t *testing.T) {
	const bs = 64
	content := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-+"), 3)[:170] // 3 blocks, the last short
	l := &fakeLender{content: content, bs: bs, random: true, cached: map[int64]bool{0: true, 2: true}}
	node := &fileNode{obj: store.Object{Key: "a", Size: int64(len(content))}}
	node.opens.n = 1
	p, stored := recordingFiller()

	p.offer(node, l, 5, 4)
	p.offer(node, l, 9, 4) // the same block again: already handed over
	if got := stored(); len(got) != 1 || got[0].off != 0 || !bytes.Equal(got[0].data, content[:bs]) {
		t.Fatalf("fills after two reads of block 0: %v; want block 0 whole, once", got)
	}
	p.offer(node, l, 160, 2) // the last block, shorter than bs
	if got := stored(); len(got) != 1 || got[0].off != 128 || !bytes.Equal(got[0].data, content[128:]) {
		t.Fatalf("fill of the last block: %v; want %q at 128", got, content[128:])
	}
	p.offer(node, l, 64, 4) // not cached: nothing, and it may be offered again
	if got := stored(); len(got) != 0 {
		t.Fatalf("fill of a block the cache does not hold: %v; want none", got)
	}
	l.cached[1] = true
	p.offer(node, l, 70, 4)
	if got := stored(); len(got) != 1 || got[0].off != 64 {
		t.Fatalf("block 1, offered before and after the cache held it: %v; want one fill at 64", got)
	}
	if s := p.stats(); s.Queued != 4 || s.Blocks != 3 || s.Failed != 1 || s.Bytes != uint64(len(content)) {
		t.Fatalf("stats %+v; want 4 queued, each ending filled (3 blocks, %d bytes) or failed (1)", s, len(content))
	}

	node.released() // the last handle: what was handed over is forgotten
	node.opens.n = 1
	p.offer(node, l, 0, bs/fakeSmallReads+1) // not small: the fill would cost what it saves
	l.random = false
	p.offer(node, l, 3, 4) // a sequential reader
	if got := stored(); len(got) != 0 {
		t.Fatalf("fills for a read of more than an eighth of a block and a sequential reader: %v; want none", got)
	}
	l.random = true
	p.offer(node, l, 3, 4)
	if got := stored(); len(got) != 1 || got[0].off != 0 {
		t.Fatalf("after the last release, block 0 again: %v; want it handed over again", got)
	}

	// An object of more than maxFillBlocks blocks gets none: its set
	// would cost more than a fill saves.
	huge := &fileNode{obj: store.Object{Key: "huge", Size: (maxFillBlocks + 1) * bs}}
	huge.opens.n = 1
	p.offer(huge, l, 5, 4)
	if got := stored(); len(got) != 0 || huge.fills.bits != nil {
		t.Fatalf("fills of an object of %d blocks: %v; want none, and no set", maxFillBlocks+1, got)
	}
}

// A full queue drops the fill and leaves the block to a later read.
func TestAFullFillQueueDropsAndForgets(t *testing.T) {
	const bs = 64
	blocks := int64(fillQueueLen + 3)
	l := &fakeLender{content: make([]byte, bs*blocks), bs: bs, random: true, cached: map[int64]bool{}}
	for i := range blocks {
		l.cached[i] = true
	}
	node := &fileNode{obj: store.Object{Key: "a", Size: int64(len(l.content))}}
	p := newPageFiller()
	started, unblock := make(chan struct{}), make(chan struct{})
	var made atomic.Int64
	p.store = func(_ *fileNode, off int64, _ []byte) syscall.Errno {
		if off == 0 {
			close(started)
			<-unblock // the first fill holds the filler: the queue fills up
		}
		made.Add(1)
		return 0
	}
	p.offer(node, l, 0, 1)
	<-started
	for i := range int64(fillQueueLen + 1) {
		p.offer(node, l, (i+1)*bs, 1)
	}
	if s := p.stats(); s.Dropped != 1 {
		t.Fatalf("dropped %d fills of %d offered to a full queue of %d; want 1", s.Dropped, fillQueueLen+1, fillQueueLen)
	}
	close(unblock)
	p.wait()
	p.offer(node, l, (fillQueueLen+1)*bs, 1) // the dropped block, read again
	p.wait()
	if got := made.Load(); got != fillQueueLen+2 {
		t.Fatalf("%d fills made; want the first, the %d queued and the dropped one offered again", got, fillQueueLen)
	}
}

// A read in a chunk the lender names hands over every block of the chunk,
// whatever the read's size, each once; a chunk longer than the queue has
// room for drops the rest and leaves them to later reads.
func TestAFillHandsAChunksBlocks(t *testing.T) {
	const bs = 64
	blocks := int64(fillQueueLen + 8)
	content := make([]byte, bs*blocks)
	for i := range content {
		content[i] = byte(i * 7)
	}
	l := &fakeLender{content: content, bs: bs, random: true, cached: map[int64]bool{}, chunk: [2]int64{2, 3}}
	for i := range blocks {
		l.cached[i] = true
	}
	node := &fileNode{obj: store.Object{Key: "a", Size: int64(len(content))}}
	node.opens.n = 1
	p, stored := recordingFiller()

	p.offer(node, l, 3*bs+1, bs) // a whole block's read, in the chunk
	got := stored()
	if len(got) != 3 {
		t.Fatalf("fills after a read in chunk [2, 5): %v; want its 3 blocks", got)
	}
	for i, f := range got {
		if off := int64(2+i) * bs; f.off != off || !bytes.Equal(f.data, content[off:off+bs]) {
			t.Fatalf("fill %d: %d bytes at %d; want block %d whole", i, len(f.data), f.off, 2+i)
		}
	}
	p.offer(node, l, 4*bs, bs) // the chunk again: handed over already
	if got := stored(); len(got) != 0 {
		t.Fatalf("fills after a second read in the chunk: %v; want none", got)
	}

	// A chunk of more blocks than the queue holds: the queue takes what
	// it has room for (the filler starts once the offer has queued them),
	// the first block refused is dropped and may be offered again, and
	// the blocks after it are not claimed either.
	l.chunk = [2]int64{5, fillQueueLen + 2}
	p.offer(node, l, 5*bs, 1)
	if got, s := stored(), p.stats(); len(got) != fillQueueLen || s.Dropped != 1 {
		t.Fatalf("a chunk of %d blocks offered to a queue of %d: %d filled, %d dropped; want %d filled, 1 dropped", fillQueueLen+2, fillQueueLen, len(got), s.Dropped, fillQueueLen)
	}
	p.offer(node, l, 5*bs, 1) // the chunk read again: the two left
	if got := stored(); len(got) != 2 || got[0].off != (5+fillQueueLen)*bs {
		t.Fatalf("the chunk offered again: %v; want its last 2 blocks", got)
	}
}
