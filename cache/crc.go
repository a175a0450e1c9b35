package cache

import (
	"hash/crc32"
	"sync"
)

// CRC32C of a concatenation from the CRCs of its parts, so that a block's
// chunk CRCs come from its grain CRCs without reading the block twice.
//
// crc32 keeps its register bit-reflected: bit 31 is the coefficient of x^0
// and bit 0 that of x^31, and the polynomial is crc32.Castagnoli in that
// order. Appending n zero bytes to a message multiplies its register by
// x^(8n) modulo the polynomial; the pre- and post-inversion crc32 applies
// cancel out of a concatenation, so
//
//	crc(A‖B) = crc(A)·x^(8·len(B)) mod P  xor  crc(B)

// crcMul returns a·b modulo the Castagnoli polynomial, both reflected.
func crcMul(a, b uint32) uint32 {
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

// crcShift is x^(8n) modulo the polynomial: what appending n bytes does to
// the CRC of what comes before them.
func crcShift(n int64) uint32 {
	p, sq := uint32(1)<<31, uint32(1)<<(31-8) // x^0, x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = crcMul(p, sq)
		}
		sq = crcMul(sq, sq)
	}
	return p
}

// crcCombine returns the CRC32C of A‖B from crcA and crcB, shift being
// crcShift(len(B)).
func crcCombine(crcA, crcB, shift uint32) uint32 {
	return crcMul(shift, crcA) ^ crcB
}

// crcShifter combines with one fixed shift by table. A product with a
// constant is linear in the other factor, so four tables of 256, one per
// byte of the register, give crcMul(shift, a) in four lookups where
// crcMul loops over 32 bits: the combines of a block's grains run for
// every block a cold read writes to the ring, so bit-serial ones would
// show in the daemon's CPU.
type crcShifter [4][256]uint32

func newCRCShifter(n int64) *crcShifter {
	shift := crcShift(n)
	t := new(crcShifter)
	for k := range t {
		for b := range t[k] {
			t[k][b] = crcMul(shift, uint32(b)<<(8*k))
		}
	}
	return t
}

// combine is crcCombine(crcA, crcB, crcShift(n)) for the shifter's n.
func (t *crcShifter) combine(crcA, crcB uint32) uint32 {
	return t[0][crcA&0xff] ^ t[1][crcA>>8&0xff] ^ t[2][crcA>>16&0xff] ^ t[3][crcA>>24] ^ crcB
}

// shifters holds one crcShifter per grain size in use (one per cache).
var shifters sync.Map // int64 -> *crcShifter

func shifterFor(n int64) *crcShifter {
	if t, ok := shifters.Load(n); ok {
		return t.(*crcShifter)
	}
	t, _ := shifters.LoadOrStore(n, newCRCShifter(n))
	return t.(*crcShifter)
}
