package prefetch

import (
	"context"
	"sync"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// Reader is one handle's read path: it answers each read from the source
// that source.go chooses and names the tier that served it. The kernel
// sends one handle's reads in parallel (async read-ahead), so its methods
// are safe for concurrent use.
type Reader struct {
	s       *Engine
	obj     store.Object
	oneShot bool
	opener  Opener

	mu     sync.Mutex // guards only the stream's creation and release, and fills
	stream *Stream    // opened on the first read that needs it
	closed bool
	fills  bool // FillCache was called: counted in the engine's fillers until Close
	// keepsPages: the kernel keeps the handle's pages (KeepsPages, lend.go)
	keepsPages bool

	last lastBlock // the cache block the previous cache hit read
}

// OpenReader returns the read path of one open of obj by opener (0 when
// unknown). oneShot is for reads with no page cache behind them and no
// later read to prepare for (the GPU interface's READ); see source.go.
func (s *Engine) OpenReader(obj store.Object, oneShot bool, opener Opener) *Reader {
	return &Reader{s: s, obj: obj, oneShot: oneShot, opener: opener}
}

// ReadAt is Read into p: bytes the read path lent are copied there, once.
func (r *Reader) ReadAt(ctx context.Context, p []byte, off int64) (int, string, error) {
	data, tier, release, err := r.Read(ctx, p, off)
	if release != nil {
		defer release()
	}
	n := len(data)
	if n > 0 && &data[0] != &p[0] {
		n = copy(p, data)
	}
	return n, tier, err
}

// FillCache says this reader is there to fill the cache (`shardfs warm`
// through a mount): while it is open, every block fetched waits for the
// cache to take it, whoever reads (Config.SkipLaggingSink is set aside),
// so that the warm leaves the cache holding what it read.
func (r *Reader) FillCache() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fills || r.closed {
		return
	}
	r.fills = true
	r.s.mu.Lock()
	r.s.gets.fillerLocked(1)
	r.s.mu.Unlock()
}

// Close releases the handle's stream; reads after it fail. A handle that
// read its object whole tells the cache, which may keep it as a
// whole-shard file for the next open (Cache.ReadDone); one that told the
// cache it reads its object whole and did not, tells it so. One-shot reads
// (the GPU interface's READ, one reader per range) do not: a range read
// into a client's buffer is not an open that the kernel will make again.
func (r *Reader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.fills {
		r.fills = false
		r.s.mu.Lock()
		r.s.gets.fillerLocked(-1)
		r.s.mu.Unlock()
	}
	r.last.mu.Lock()
	r.last.data = nil
	r.last.mu.Unlock()
	if r.stream != nil {
		r.s.tells.deliver(&r.s.mu, r.s.cache) // a guess's telling, which this stream may have taken over, first
		whole, told := r.stream.readWhole()
		whole = whole && r.s.cache != nil && !r.oneShot
		r.stream.Close()
		switch {
		case whole:
			r.s.readWhole(r.stream)
		case told:
			r.s.cache.ReadDone(r.obj, false) // the object's file is not finished for this handle
		}
		r.stream = nil
	}
}

// readWhole records that st, now closed, read its object whole, and tells
// the cache (Cache.ReadDone) once no part of the object is bringing bytes
// to the cache: a reader reads a part's last bytes before the part's GET
// has handed them over, and the cache makes a whole-shard file only of a
// shard whose every block it holds. Parts of the object that stay for
// other reasons (another stream's guess that the object comes next) do
// not hold the news back.
func (s *Engine) readWhole(st *Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.o == nil {
		return // opened after the engine closed
	}
	st.o.readWhole = true
	s.tellReadWholeLocked(st.o)
}

// tellReadWholeLocked tells the cache that o was read whole once none of
// its parts is fetching or being handed to the cache (readWhole).
// Cache.ReadDone never waits.
func (s *Engine) tellReadWholeLocked(o *object) {
	if !o.readWhole {
		return
	}
	for _, p := range o.parts {
		if p.state == partFetching || p.sinking {
			return
		}
	}
	o.readWhole = false
	s.cache.ReadDone(o.obj, true)
}

// openStream returns the handle's stream, opening it on first use; nil
// once the handle is released.
func (r *Reader) openStream() *Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream == nil && !r.closed {
		r.stream = r.s.OpenBy(r.obj, r.opener)
		r.s.mu.Lock()
		r.stream.keepsPages = r.keepsPages
		if r.s.cache != nil && !r.oneShot && r.stream.wholeFile == wholeFileNever {
			r.stream.wholeFile = wholeFileLater
		}
		r.s.mu.Unlock()
	}
	return r.stream
}

// clip shortens p so that it ends at the end of the object.
func clip(obj store.Object, p []byte, off int64) ([]byte, bool) {
	if rest := obj.Size - off; int64(len(p)) > rest {
		return p[:rest], true
	}
	return p, false
}

// readBlockwise returns q's range [off, off+len(q)) from the handle's kept
// block when it lies in one block, or from the block read anew from tiers;
// false when it does not lie in one block, or the block is not cached
// there. With a shared RAM tier, a block in RAM is not kept: the range is
// copied into q out of the tier's slot.
func (r *Reader) readBlockwise(q []byte, off int64, tiers cache.Tier) ([]byte, bool) {
	bs := r.s.cfg.BlockSize
	n := int64(len(q))
	start := off / bs * bs
	if off+n > start+bs {
		return nil, false
	}
	if r.s.sharedRAM && tiers.Has(cache.InRAM) && r.s.cache.ReadRAM(r.obj, q, off) {
		// A shared tier reuses its slots, so Get hands out a copy of the
		// whole block: the read's own bytes are copied out of the slot.
		return q, true
	}
	b := &r.last
	b.mu.Lock()
	defer b.mu.Unlock()
	if data, ok := b.slice(off, n); ok {
		return data, true
	}
	data, _, ok := r.s.cache.Get(r.obj, start/bs, tiers)
	if !ok {
		b.data = nil
		return nil, false
	}
	b.off, b.data = start, data
	return b.slice(off, n)
}

// lastBlock keeps the one cache block a handle read last. The kernel reads
// in requests smaller than a block (128 KiB with its default read-ahead);
// without it, each request would look up (and, from the ring, read and
// checksum) the whole block again. data is the cache's shared slice, not a
// copy: a handle costs no buffer of its own.
type lastBlock struct {
	mu   sync.Mutex
	off  int64
	data []byte // nil when it holds nothing; never written
}

// slice returns [off, off+n) of the kept block if it holds all of it: the
// cache's own bytes, which are never written again.
func (b *lastBlock) slice(off, n int64) ([]byte, bool) {
	if len(b.data) == 0 || off < b.off || off+n > b.off+int64(len(b.data)) {
		return nil, false
	}
	return b.data[off-b.off : off-b.off+n], true
}
