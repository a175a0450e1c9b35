package cache

import (
	"context"
	"testing"

	"github.com/shardfs/shardfs/store"
)

const benchBlock = 1 << 20

// benchRing fills a ring-only cache of 1 MiB blocks with one 128 MiB shard.
func benchRing(b *testing.B) (*Cache, store.Object) {
	b.Helper()
	c, err := Open(context.Background(), Config{Dir: b.TempDir(), Size: 256 << 20, BlockSize: benchBlock}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	obj := store.Object{Key: "bench.tar", Size: 128 << 20, ETag: `"b"`}
	part := make([]byte, 8<<20)
	for off := int64(0); off < obj.Size; off += int64(len(part)) {
		putRange(c, obj, off, part)
	}
	return c, obj
}

func BenchmarkPut8MiB(b *testing.B) {
	c, err := Open(context.Background(), Config{Dir: b.TempDir(), Size: 256 << 20, BlockSize: benchBlock}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	part := make([]byte, 8<<20)
	b.SetBytes(int64(len(part)))
	for i := 0; b.Loop(); i++ {
		// A fresh version each time so every block is written.
		obj := store.Object{Key: "w.tar", Size: int64(len(part)), ETag: string(rune('a'+i%26)) + string(rune(i))}
		putRange(c, obj, 0, part)
	}
}

// BenchmarkReadAtRing reads 1 MiB blocks from the ring through ReadAt
// (direct I/O, CRC check, copy).
func BenchmarkReadAtRing(b *testing.B) {
	c, obj := benchRing(b)
	p := make([]byte, benchBlock)
	b.SetBytes(benchBlock)
	for i := int64(0); b.Loop(); i++ {
		if _, ok := c.ReadAt(obj, p, (i%128)*benchBlock, ForReadAhead); !ok {
			b.Fatal("miss")
		}
	}
}

// BenchmarkRawRingRead is the floor ReadAt is measured against: direct
// 1 MiB preads of the same ring file, as dd iflag=direct does.
func BenchmarkRawRingRead(b *testing.B) {
	c, _ := benchRing(b)
	buf := alignedBuffer(benchBlock)
	b.SetBytes(benchBlock)
	for i := int64(0); b.Loop(); i++ {
		if err := c.ring.file.readFull(buf, c.ring.geo.dataOffset(i%128)); err != nil {
			b.Fatal(err)
		}
	}
}

// The parallel variants read as the kernel does with several FUSE requests
// in flight, so checksums overlap with I/O.
func BenchmarkReadAtRingParallel(b *testing.B) {
	c, obj := benchRing(b)
	b.SetBytes(benchBlock)
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		p := make([]byte, benchBlock)
		for i := int64(0); pb.Next(); i++ {
			if _, ok := c.ReadAt(obj, p, (i%128)*benchBlock, ForReadAhead); !ok {
				b.Error("miss")
				return
			}
		}
	})
}

func BenchmarkRawRingReadParallel(b *testing.B) {
	c, _ := benchRing(b)
	b.SetBytes(benchBlock)
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		buf := alignedBuffer(benchBlock)
		for i := int64(0); pb.Next(); i++ {
			if err := c.ring.file.readFull(buf, c.ring.geo.dataOffset(i%128)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReadChunks4KiB is a random reader's 4 KiB read of a ring block
// the RAM tier does not hold: its grains through the page cache, checked.
func BenchmarkReadChunks4KiB(b *testing.B) {
	c, obj := benchRing(b)
	p := make([]byte, 4096)
	b.SetBytes(int64(len(p)))
	for i := int64(0); b.Loop(); i++ {
		off := (i*7919)%128*benchBlock + (i*31)%256*4096
		if _, ok := c.ReadChunks(obj, p, off); !ok {
			b.Fatal("miss")
		}
	}
}
