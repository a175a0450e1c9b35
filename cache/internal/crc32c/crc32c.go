// Package crc32c is the CRC32C (Castagnoli) of a concatenation from the
// CRCs of its parts: the cache's chunk CRCs from its grain CRCs, and a
// whole-shard file's CRC from its blocks' CRCs, without reading any byte
// twice. It owns the arithmetic only; it never reads or writes data.
package crc32c

import (
	"hash/crc32"
	"sync"
)

// crc32 keeps its register bit-reflected: bit 31 is the coefficient of x^0
// and bit 0 that of x^31, and the polynomial is crc32.Castagnoli in that
// order. Appending n zero bytes to a message multiplies its register by
// x^(8n) modulo the polynomial; the pre- and post-inversion crc32 applies
// cancel out of a concatenation, so
//
//	crc(A‖B) = crc(A)·x^(8·len(B)) mod P  xor  crc(B)

// mul returns a·b modulo the Castagnoli polynomial, both reflected.
func mul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		// b·x: the x^31 coefficient wraps around through the polynomial.
		if b&1 != 0 {
			b = b>>1 ^ crc32.Castagnoli
		} else {
			b >>= 1
		}
	}
	return p
}

// Shift is x^(8n) modulo the polynomial: what appending n bytes does to
// the CRC of what comes before them.
func Shift(n int64) uint32 {
	p, sq := uint32(1)<<31, uint32(1)<<(31-8) // x^0, x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = mul(p, sq)
		}
		sq = mul(sq, sq)
	}
	return p
}

// Combine returns the CRC32C of A‖B from crcA and crcB, shift being
// Shift(len(B)).
func Combine(crcA, crcB, shift uint32) uint32 {
	return mul(shift, crcA) ^ crcB
}

// Shifter combines with one fixed shift by table. A product with a
// constant is linear in the other factor, so four tables of 256, one per
// byte of the register, give mul(shift, a) in four lookups where
// mul loops over 32 bits: the combines of a block's grains run for
// every block a cold read writes to the ring, so bit-serial ones would
// show in the daemon's CPU.
type Shifter [4][256]uint32

func newShifter(n int64) *Shifter {
	shift := Shift(n)
	t := new(Shifter)
	for k := range t {
		for b := range t[k] {
			t[k][b] = mul(shift, uint32(b)<<(8*k))
		}
	}
	return t
}

// Combine is Combine(crcA, crcB, Shift(n)) for the shifter's n.
func (t *Shifter) Combine(crcA, crcB uint32) uint32 {
	return t[0][crcA&0xff] ^ t[1][crcA>>8&0xff] ^ t[2][crcA>>16&0xff] ^ t[3][crcA>>24] ^ crcB
}

// shifters holds one Shifter per grain size in use (one per cache).
var shifters sync.Map // int64 -> *Shifter

func ShifterFor(n int64) *Shifter {
	if t, ok := shifters.Load(n); ok {
		return t.(*Shifter)
	}
	t, _ := shifters.LoadOrStore(n, newShifter(n))
	return t.(*Shifter)
}
