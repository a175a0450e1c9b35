package wholefile

import (
	"context"
	"fmt"
	"sync"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/cache/internal/aligned"
	"github.com/shardfs/shardfs/cache/internal/crc32c"
)

// A Builder writes a shard's file while the shard is being read: each
// block the caller is handed for its own cache goes to the file too
// (Builder.Write), in whatever order the reads bring them, with the CRC32C
// the caller summed it by. Finish fills the blocks no Write brought (they
// were cached before the build began) through a ReadFunc, combines the
// blocks' CRCs into the file's, and vouches for the file as Make does. A
// shard read whole this way becomes a file the moment its read ends, with
// no second copy of its bytes: the next pass over a data set opens files,
// not the daemon's reads.
//
// The file's room is reserved when the build begins; Abandon gives it back
// and removes what was written. A Write after Finish or Abandon is
// ignored.
type Builder struct {
	t         *Tier
	s         Shard
	name      string
	blockSize int64
	f         *atomicfile.File

	// mu: Write holds it shared (writes of different blocks run at once),
	// Finish and Abandon exclusively; done is under it.
	mu   sync.RWMutex
	done bool
	// table guards what the writes record, under mu held shared.
	table  sync.Mutex
	sums   map[int64]uint32 // block index → CRC32C of its bytes, for blocks written
	failed error            // the first write that failed: Finish makes no file
}

// Begin starts a build of s's file from blocks of blockSize bytes (a
// multiple of the alignment O_DIRECT asks). It reports false when the
// tier holds the file, another build or Make is writing it, or it does not
// fit the quota.
func (t *Tier) Begin(s Shard, blockSize int64) (*Builder, bool, error) {
	if s.Size <= 0 || blockSize <= 0 || blockSize%aligned.Size != 0 {
		return nil, false, nil
	}
	name := Name(s.ID)
	if t.has(name) || !t.reserve(name, s.Size) {
		return nil, false, nil
	}
	f, err := atomicfile.Create(t.path(name))
	if err != nil {
		t.unreserve(name, s.Size)
		return nil, false, fmt.Errorf("whole-shard file: %w", err)
	}
	// Blocks are written from aligned buffers at aligned offsets: with
	// O_DIRECT they go to the disk without a copy into the page cache. A
	// filesystem that refuses it takes them through the page cache.
	_ = f.Direct(true)
	return &Builder{t: t, s: s, name: name, blockSize: blockSize, f: f, sums: map[int64]uint32{}}, true, nil
}

// blocks is how many blocks the shard has.
func (b *Builder) blocks() int64 { return (b.s.Size + b.blockSize - 1) / b.blockSize }

// length is how many of the shard's bytes block index holds.
func (b *Builder) length(index int64) int64 {
	return min(b.blockSize, b.s.Size-index*b.blockSize)
}

// Write puts block index in the file: p holds its bytes at an aligned
// address, and sum is the CRC32C of them. The shard's short last block
// may come with or without padding to the alignment; without, it is
// copied into an aligned buffer first (once per shard: the part that
// fetched it has no room past the shard's end). p is not kept. It reports
// whether the file took the block: false once the build is finished,
// abandoned or failed, or for a block that is not one of the shard's.
func (b *Builder) Write(index int64, p []byte, sum uint32) bool {
	if index < 0 || index >= b.blocks() {
		return false
	}
	n := b.length(index)
	if int64(len(p)) < n {
		return false
	}
	if int64(len(p)) < aligned.Up(n) {
		padded := aligned.Buffer(int(aligned.Up(n)))
		copy(padded, p[:n])
		p = padded
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.done {
		return false
	}
	_, err := b.f.WriteAt(p[:aligned.Up(b.length(index))], index*b.blockSize)
	b.table.Lock()
	defer b.table.Unlock()
	switch {
	case err != nil && b.failed == nil:
		b.failed = err
	case err == nil && b.failed == nil:
		b.sums[index] = sum
		return true
	}
	return false
}

// Finish completes the file: the blocks no Write brought are read by
// read, every byte checked, then the file is vouched for and named, with
// nothing synced (Tier.commit, Unsynced): the pass reading the shard's
// next open must not wait for a flush. It reports whether the tier holds the file when it
// returns; false with a nil error when a block is missing or failing its
// check. The Builder is spent either way.
func (b *Builder) Finish(ctx context.Context, read ReadFunc) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return false, nil
	}
	b.done = true
	ok, err := b.finishLocked(ctx, read)
	if !ok || err != nil {
		b.f.Discard()
		b.t.unreserve(b.name, b.s.Size)
	}
	return ok, err
}

func (b *Builder) finishLocked(ctx context.Context, read ReadFunc) (bool, error) {
	if b.failed != nil {
		return false, fmt.Errorf("whole-shard file of %s: %w", b.s.Key, b.failed)
	}
	var buf []byte
	var sum uint32
	full := crc32c.ShifterFor(b.blockSize)
	for i := range b.blocks() {
		n := b.length(i)
		s, ok := b.sums[i]
		if !ok {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if buf == nil {
				buf = aligned.Buffer(int(b.blockSize))
			}
			p := buf[:n]
			if !read(p, i*b.blockSize) {
				return false, nil
			}
			s = checksum(p)
			clear(buf[n:])
			if _, err := b.f.WriteAt(buf[:aligned.Up(n)], i*b.blockSize); err != nil {
				return false, fmt.Errorf("whole-shard file of %s: %w", b.s.Key, err)
			}
		}
		switch {
		case i == 0:
			sum = s
		case n == b.blockSize:
			sum = full.Combine(sum, s)
		default:
			sum = crc32c.Combine(sum, s, crc32c.Shift(n))
		}
	}
	if err := b.f.Truncate(b.s.Size); err != nil {
		return false, fmt.Errorf("whole-shard file of %s: %w", b.s.Key, err)
	}
	r := record{Name: b.name, Key: b.s.Key, ETag: b.s.ETag, Size: b.s.Size, Sum: sum}
	if err := b.t.commit(r, b.f, atomicfile.Unsynced); err != nil {
		return false, fmt.Errorf("whole-shard file of %s: %w", b.s.Key, err)
	}
	return true, nil
}

// Abandon stops the build: what was written is removed and the room given
// back. A no-op after Finish.
func (b *Builder) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	b.f.Discard()
	b.t.unreserve(b.name, b.s.Size)
}
