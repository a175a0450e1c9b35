package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// Combine gives the CRC32C of a concatenation from its parts' CRCs, for
// lengths around the grain, chunk and block sizes the cache uses.
func TestCombineIsTheCRCOfTheConcatenation(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	table := crc32.MakeTable(crc32.Castagnoli)
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, cut := range [][2]int{{0, 1}, {1, 1}, {4096, 4096}, {1 << 20, 1<<20 - 1}, {5, 3 << 19}, {1 << 20, 2 << 20}} {
		a, b := data[:cut[0]], data[cut[0]:cut[0]+cut[1]]
		want := crc32.Checksum(data[:cut[0]+cut[1]], table)
		if got := Combine(crc32.Checksum(a, table), crc32.Checksum(b, table), Shift(int64(len(b)))); got != want {
			t.Fatalf("%d + %d bytes: Combine %08x, the CRC of both %08x", len(a), len(b), got, want)
		}
		if got := ShifterFor(int64(len(b))).Combine(crc32.Checksum(a, table), crc32.Checksum(b, table)); got != want {
			t.Fatalf("%d + %d bytes: Shifter.Combine %08x, the CRC of both %08x", len(a), len(b), got, want)
		}
	}
}

// The table shifter combines as the bit-serial product does, for every
// shift a ring uses and odd ones.
func TestCRCShifterCombinesAsCrcMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int64{1, 7, 4096, 4352, 12288, 1 << 20} {
		sh := ShifterFor(n)
		for range 1000 {
			a, b := rng.Uint32(), rng.Uint32()
			if got, want := sh.Combine(a, b), Combine(a, b, Shift(n)); got != want {
				t.Fatalf("shift %d: combine(%08x, %08x) = %08x, Combine %08x", n, a, b, got, want)
			}
		}
	}
}
