package cache

import (
	"math/rand/v2"
	"testing"
)

// The chunk CRCs sumBlock combines from grain CRCs equal the CRCs of the
// chunks themselves, for full and short blocks of several grain sizes.
func TestSumBlockChunksMatchTheirBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bs := range []int64{4096, 16 << 10, 1 << 20, 3 << 20, 300 * 4096} {
		grain, chunk := grainSizeFor(bs), chunkSizeFor(bs)
		data := make([]byte, bs)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for _, n := range []int64{1, 100, grain - 1, grain, grain + 1, chunk + 5, bs - 1, bs} {
			n = min(max(n, 1), bs)
			chunks, grains := sumBlock(data[:n], grain)
			for _, piece := range []struct {
				name string
				size int64
				sums []uint32
			}{{"chunk", chunk, chunks[:]}, {"grain", grain, grains[:]}} {
				for i, got := range piece.sums {
					lo := int64(i) * piece.size
					var want uint32
					if lo < n {
						want = checksum(data[lo:min(lo+piece.size, n)])
					}
					if got != want {
						t.Fatalf("block %d, %d bytes: %s %d CRC %08x, its bytes' %08x", bs, n, piece.name, i, got, want)
					}
				}
			}
		}
	}
}

func BenchmarkSumBlock(b *testing.B) {
	data := make([]byte, 1<<20)
	grain := grainSizeFor(int64(len(data)))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		sumBlock(data, grain)
	}
}
