package fs

import (
	"sync"
	"sync/atomic"
	"syscall"
)

// Page-cache fills.
//
// A random reader (a map-style Dataset's pread per sample, fio
// --rw=randread) sends the daemon one READ per small read, and each costs
// a round trip through /dev/fuse: two system calls and two wake-ups, more
// CPU than a 4 KiB copy. When such a read lands in a block the cache
// holds whole, the mount hands the whole block to the kernel's page cache
// (FUSE_NOTIFY_STORE) once the read is answered: the block's other reads
// are then served by the kernel and never reach the daemon.
//
// Rules:
//   - Only handles whose pages the kernel keeps (KeepPages, not passed
//     through), and only blocks the read path names after a read
//     (BlockLender.FillRange): the block of a small random read (a block
//     holds many of them, and a fill copies the whole block into new
//     pages, which costs about what the replies to its reads would: it
//     pays when it saves many round trips, not when it saves three), and
//     the blocks of a chunk fetched with a random read of an object larger
//     than the cache (prefetch/exact.go), whose other reads would each
//     fetch their own bytes. A sequential reader's pages come from the
//     kernel's own read-ahead.
//   - Each block of an inode is handed over at most once while the inode
//     has open handles, so a fill costs at most the object's size in
//     copies however the kernel evicts; a read of an evicted page comes to
//     the daemon as before. The last release forgets what was filled.
//   - A block is lent only from bytes the read path holds: the cache's, or
//     a chunk's part in flight. A fill never starts a GET.
//
// Why a goroutine: the kernel holds the pages of a READ in flight locked,
// and NOTIFY_STORE waits for each page's lock, so a fill written by the
// goroutine that has yet to answer that READ would wait forever. Fills go
// to the mount's pageFiller, which runs one goroutine while it has fills
// queued (it exits when the queue is empty) and drops a fill when its
// bounded queue is full: a dropped fill only leaves the reads to the
// daemon.

// Lock order: inodeOpens.mu, then blockSet.mu (the last release resets
// the set); pageFiller.mu is never held with either.

// BlockLender is a Reader that lends whole blocks for fills
// (prefetch.Reader satisfies it).
type BlockLender interface {
	// KeepsPages says the kernel keeps this handle's pages, so blocks
	// lent for it reach them; called at open, before any read.
	KeepsPages()
	// FillRange returns the blocks [first, first+count) worth a fill
	// after a read of n bytes at off by this handle; count 0: none.
	FillRange(off int64, n int) (first, count int64)
	// LendBlock returns block index whole and its offset when the read
	// path holds it: the cache's own bytes, or the block read or copied
	// into buf (BlockSize long).
	LendBlock(index int64, buf []byte) (start int64, data []byte, ok bool)
	// BlockSize is the size of the blocks named.
	BlockSize() int64
}

// maxFillBlocks bounds the set of one open inode (128 KiB): an object of
// more blocks (a TiB at 1 MiB blocks) gets no fills.
const maxFillBlocks = 1 << 20

// fillQueueLen bounds the fills waiting for the filler: at most this many
// blocks are copied behind the reads that asked for them (a few chunks'
// worth, prefetch.Config.PartSize).
const fillQueueLen = 128

// fill is one block to hand to the kernel.
type fill struct {
	node   *fileNode
	lender BlockLender
	index  int64
}

// pageFiller hands blocks to the kernel's page cache, one at a time, on
// its own goroutine. Its counters feed the stats.
type pageFiller struct {
	queue chan fill
	// store hands data, at off of node's object, to the kernel's page
	// cache (node.WriteCache; tests record instead).
	store func(node *fileNode, off int64, data []byte) syscall.Errno

	mu      sync.Mutex
	running bool   // a goroutine drains the queue
	buf     []byte // the ring block buffer, kept between goroutines
	wg      sync.WaitGroup

	queued, filled, bytes, dropped, failed atomic.Uint64
}

func newPageFiller() *pageFiller {
	return &pageFiller{
		queue: make(chan fill, fillQueueLen),
		store: func(node *fileNode, off int64, data []byte) syscall.Errno { return node.WriteCache(off, data) },
	}
}

// FillStats counts page-cache fills: blocks queued for the filler, blocks
// handed to the kernel and their bytes, fills dropped because the queue
// was full, and fills the kernel refused or the cache no longer held.
type FillStats struct {
	Queued, Blocks, Bytes, Dropped, Failed uint64
}

func (p *pageFiller) stats() FillStats {
	if p == nil {
		return FillStats{}
	}
	return FillStats{Queued: p.queued.Load(), Blocks: p.filled.Load(), Bytes: p.bytes.Load(), Dropped: p.dropped.Load(), Failed: p.failed.Load()}
}

// offer queues fills of the blocks the lender names after a read of n
// bytes at off for node, but for blocks filled already while the inode is
// open; once the queue is full, the rest are dropped.
func (p *pageFiller) offer(node *fileNode, lender BlockLender, off int64, n int) {
	if p == nil {
		return
	}
	first, count := lender.FillRange(off, n)
	if count <= 0 {
		return
	}
	bs, queued := lender.BlockSize(), false
	for index := first; index < first+count; index++ {
		if !node.fills.claim(index, bs, node.obj.Size) {
			continue
		}
		select {
		case p.queue <- fill{node: node, lender: lender, index: index}:
			queued = true
			p.queued.Add(1)
			continue
		default:
		}
		p.dropped.Add(1)
		node.fills.unclaim(index) // a later read may offer it again
		break
	}
	if !queued {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		p.running = true
		p.wg.Add(1)
		go p.drain()
	}
}

// drain fills blocks until the queue is empty, then exits. It is the
// queue's only receiver, so a queue it found not empty has a fill for it.
func (p *pageFiller) drain() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.fillOne(<-p.queue)
	}
}

func (p *pageFiller) fillOne(f fill) {
	if bs := f.lender.BlockSize(); int64(len(p.buf)) != bs {
		p.buf = make([]byte, bs)
	}
	start, data, ok := f.lender.LendBlock(f.index, p.buf)
	if !ok {
		p.failed.Add(1)
		f.node.fills.unclaim(f.index)
		return
	}
	if errno := p.store(f.node, start, data); errno != 0 {
		// ENOENT: the kernel forgot the inode; nothing to fill.
		p.failed.Add(1)
		return
	}
	p.filled.Add(1)
	p.bytes.Add(uint64(len(data)))
}

// wait returns once no fill is queued or running (tests).
func (p *pageFiller) wait() { p.wg.Wait() }

// blockSet records which blocks of an inode were filled while it is open.
type blockSet struct {
	mu   sync.Mutex
	bits []uint64 // nil until the first fill
}

// claim marks block index of an object of size bytes (blocks of bs) and
// reports whether it was not marked before; false for an object of more
// than maxFillBlocks blocks.
func (s *blockSet) claim(index, bs, size int64) bool {
	if index < 0 || index*bs >= size || (size+bs-1)/bs > maxFillBlocks {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bits == nil {
		s.bits = make([]uint64, ((size+bs-1)/bs+63)/64)
	}
	w, b := index/64, uint64(1)<<(index%64)
	if s.bits[w]&b != 0 {
		return false
	}
	s.bits[w] |= b
	return true
}

func (s *blockSet) unclaim(index int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := index / 64; s.bits != nil && w < int64(len(s.bits)) {
		s.bits[w] &^= uint64(1) << (index % 64)
	}
}

// reset forgets every mark: the inode's last handle was released.
func (s *blockSet) reset() {
	s.mu.Lock()
	s.bits = nil
	s.mu.Unlock()
}
