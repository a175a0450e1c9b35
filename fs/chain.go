package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/shardfs/shardfs/store"
)

// errDecline is how a reader says "not mine": the chain asks the next one.
var errDecline = errors.New("reader declines")

// BlockCache is the cache as the read path sees it. cache.Cache satisfies it.
type BlockCache interface {
	// Block returns one whole cached block, from RAM or (verified) from
	// disk, shared: never written again, valid for as long as the caller
	// keeps it.
	Block(obj store.Object, index int64) ([]byte, bool)
	// MemBlock is Block from RAM alone: it never waits on the disk.
	MemBlock(obj store.Object, index int64) ([]byte, bool)
	// ReadAtPromoting copies [off, off+len(p)) into p when every block of
	// it is cached, reading blocks on disk straight into p, several at
	// once, and offering them to a RAM tier that has room.
	ReadAtPromoting(obj store.Object, p []byte, off int64) (int, bool)
	// PutRange stores fetched bytes; off is block-aligned.
	PutRange(obj store.Object, off int64, data []byte)
}

// Stream is one handle's read-ahead stream. prefetch.Stream satisfies it.
type Stream interface {
	// ReadShared is io.ReaderAt's ReadAt that may answer without a copy:
	// data is p[:n], or bytes of the stream's own that stay valid until
	// release, which is nil when there is nothing to release and is
	// otherwise called exactly once. cached says whether every byte came
	// from the cache (read ahead from disk) rather than a GET.
	ReadShared(ctx context.Context, p []byte, off int64) (data []byte, cached bool, release func(), err error)
	// Observe tells the stream of a read served elsewhere (the RAM tier),
	// so its window moves on and it lets go of parts that read consumed.
	Observe(off, n int64)
	Close()
}

// Prefetcher opens read-ahead streams and takes explicit schedules.
type Prefetcher interface {
	OpenStream(obj store.Object) Stream
	Hint(objs ...store.Object)
}

// reader is one link of the chain. It answers a read of len(p) bytes at
// off (io.ReaderAt semantics: short only at the end of the object, with
// io.EOF), or returns errDecline.
type reader interface {
	readAt(ctx context.Context, h *readState, p []byte, off int64) (reply, error)
}

// reply is a reader's answer. data is p[:n], or bytes the reader lends so
// that the kernel's reply is written from them without a copy: a cache
// block (never written again, so nothing to release) or a pinned prefetch
// part (released once the reply is written). tier names where the bytes
// came from, for metrics.
type reply struct {
	data    []byte
	tier    string
	release func() // nil when there is nothing to release
}

// done releases the reply's bytes; it is called exactly once per reply.
func (r reply) done() {
	if r.release != nil {
		r.release()
	}
}

// Tiers reported to Options.ObserveRead.
const (
	TierCache   = "cache"
	TierNetwork = "network"
)

// readState is what the chain keeps per open file. The kernel sends one
// handle's reads in parallel (async read-ahead), so reads share it
// concurrently; mu guards only the stream's creation and release.
type readState struct {
	obj store.Object

	mu     sync.Mutex
	stream Stream // opened on the first read that reaches the prefetch link
	closed bool

	last lastBlock // the cache block the previous cache hit read
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

// openStream returns the handle's stream, opening it on first use; nil
// once the handle is released.
func (s *readState) openStream(pf Prefetcher) Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil && !s.closed {
		s.stream = pf.OpenStream(s.obj)
	}
	return s.stream
}

func (s *readState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.last.mu.Lock()
	s.last.data = nil
	s.last.mu.Unlock()
	if s.stream != nil {
		s.stream.Close()
		s.stream = nil
	}
}

// chain asks each reader in order. When reads are served by the cache
// the handle's stream still hears of them (pf set), so read-ahead keeps
// pace with the reader and next-shard prefetch fires on cached shards too.
type chain struct {
	readers []reader
	pf      Prefetcher
}

// read answers from the first reader that does not decline. The caller
// calls done on the reply, also when err is not nil.
func (c chain) read(ctx context.Context, h *readState, p []byte, off int64) (reply, error) {
	if off >= h.obj.Size || len(p) == 0 {
		return reply{tier: TierCache}, io.EOF
	}
	for _, r := range c.readers {
		rep, err := r.readAt(ctx, h, p, off)
		if errors.Is(err, errDecline) {
			continue
		}
		if _, cached := r.(cacheReader); cached && c.pf != nil && len(rep.data) > 0 {
			if st := h.openStream(c.pf); st != nil {
				st.Observe(off, int64(len(rep.data)))
			}
		}
		return rep, err
	}
	return reply{tier: TierNetwork}, errDecline
}

// readAt is read into p: bytes a reader lent are copied there, once. It
// returns the tier of the reader that served.
func (c chain) readAt(ctx context.Context, h *readState, p []byte, off int64) (int, string, error) {
	rep, err := c.read(ctx, h, p, off)
	defer rep.done()
	n := len(rep.data)
	if n > 0 && &rep.data[0] != &p[0] {
		n = copy(p, rep.data)
	}
	return n, rep.tier, err
}

// newChain assembles the readers that are configured, fastest first. With
// read-ahead, the cache link serves from RAM alone: blocks on disk are read
// by the stream, ahead of the reader and in parallel, rather than one at a
// time when each read reaches them.
func newChain(st store.Store, cache BlockCache, pf Prefetcher, blockSize int64) chain {
	c := chain{pf: pf}
	if cache != nil {
		c.readers = append(c.readers, cacheReader{cache: cache, blockSize: blockSize, memOnly: pf != nil})
	}
	if pf != nil {
		c.readers = append(c.readers, streamReader{pf})
	} else {
		c.readers = append(c.readers, directReader{st: st, cache: cache, blockSize: blockSize})
	}
	return c
}

// newOneShotChain is newChain for reads made without a handle (the GPU side
// interface): with nothing to read ahead for, the cache link serves from
// disk too, copying each byte once.
func newOneShotChain(st store.Store, cache BlockCache, pf Prefetcher, blockSize int64) chain {
	c := newChain(st, cache, pf, blockSize)
	if cache != nil {
		c.readers[0] = cacheReader{cache: cache, blockSize: blockSize}
	}
	return c
}

// clip shortens p so that it ends at the end of the object.
func clip(obj store.Object, p []byte, off int64) ([]byte, bool) {
	if rest := obj.Size - off; int64(len(p)) > rest {
		return p[:rest], true
	}
	return p, false
}

// cacheReader serves reads whose blocks are all cached (in RAM alone when
// memOnly). A read inside one block reads the whole block once into the
// handle's lastBlock and is answered with the block's own bytes; a read
// that spans blocks is copied into p.
type cacheReader struct {
	cache     BlockCache
	blockSize int64
	memOnly   bool
}

func (r cacheReader) block(obj store.Object, index int64) ([]byte, bool) {
	if r.memOnly {
		return r.cache.MemBlock(obj, index)
	}
	return r.cache.Block(obj, index)
}

func (r cacheReader) readAt(ctx context.Context, h *readState, p []byte, off int64) (reply, error) {
	q, short := clip(h.obj, p, off)
	data, ok := r.readBlockwise(h, off, int64(len(q)))
	if !ok {
		if !r.readSpanning(h.obj, q, off) {
			return reply{tier: TierCache}, errDecline
		}
		data = q
	}
	if short {
		return reply{data: data, tier: TierCache}, io.EOF
	}
	return reply{data: data, tier: TierCache}, nil
}

// readBlockwise returns [off, off+n) from the handle's kept block when it
// lies in one block; false when it does not, or the block is not cached.
func (r cacheReader) readBlockwise(h *readState, off, n int64) ([]byte, bool) {
	bs := r.blockSize
	start := off / bs * bs
	if bs <= 0 || off+n > start+bs {
		return nil, false
	}
	b := &h.last
	b.mu.Lock()
	defer b.mu.Unlock()
	if data, ok := b.slice(off, n); ok {
		return data, true
	}
	data, ok := r.block(h.obj, start/bs)
	if !ok {
		b.data = nil
		return nil, false
	}
	b.off, b.data = start, data
	return b.slice(off, n)
}

// readSpanning serves q, which may span blocks, when every block is cached.
func (r cacheReader) readSpanning(obj store.Object, q []byte, off int64) bool {
	if !r.memOnly {
		// A one-shot read (the GPU side interface's READ, megabytes at a
		// time): disk blocks go straight into q, several at once, with no
		// block buffer; RAM keeps copies only while it has room.
		_, ok := r.cache.ReadAtPromoting(obj, q, off)
		return ok
	}
	bs := r.blockSize
	if bs <= 0 {
		return false
	}
	end := off + int64(len(q))
	for index := off / bs; index*bs < end; index++ {
		data, ok := r.block(obj, index)
		if !ok {
			return false
		}
		start := index * bs
		lo, hi := max(off, start), min(end, start+bs)
		if int64(len(data)) < hi-start { // not the whole block: never serve a short copy
			return false
		}
		copy(q[lo-off:hi-off], data[lo-start:hi-start])
	}
	return true
}

// streamReader reads through the handle's prefetch stream.
type streamReader struct{ pf Prefetcher }

func (r streamReader) readAt(ctx context.Context, h *readState, p []byte, off int64) (reply, error) {
	st := h.openStream(r.pf)
	if st == nil {
		return reply{tier: TierNetwork}, fmt.Errorf("read %s: handle released: %w", h.obj.Key, context.Canceled)
	}
	data, cached, release, err := st.ReadShared(ctx, p, off)
	rep := reply{data: data, tier: TierNetwork, release: release}
	if cached {
		rep.tier = TierCache
	}
	return rep, err
}

// directReader is the plain path: whole blocks by ranged GET (stored in the
// cache when there is one), or exactly the bytes asked for when there is no
// cache to keep the rest.
type directReader struct {
	st        store.Store
	cache     BlockCache
	blockSize int64
}

func (r directReader) readAt(ctx context.Context, h *readState, p []byte, off int64) (reply, error) {
	n, err := r.read(ctx, h, p, off)
	return reply{data: p[:n], tier: TierNetwork}, err
}

func (r directReader) read(ctx context.Context, h *readState, p []byte, off int64) (int, error) {
	if r.cache == nil || r.blockSize <= 0 {
		return r.st.ReadRange(ctx, h.obj, off, p)
	}
	start := off / r.blockSize * r.blockSize
	end := min((off+int64(len(p))+r.blockSize-1)/r.blockSize*r.blockSize, h.obj.Size)
	buf := make([]byte, end-start)
	n, err := r.st.ReadRange(ctx, h.obj, start, buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	r.cache.PutRange(h.obj, start, buf[:n])
	q, short := clip(h.obj, p, off)
	copied := copy(q, buf[off-start:n])
	if short {
		return copied, io.EOF
	}
	return copied, nil
}
