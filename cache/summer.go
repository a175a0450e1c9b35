package cache

// Summer computes the ring's grain CRCs of a fetch's buffer while its bytes
// arrive, a few KiB behind the socket, when they are still in the CPU's
// caches. Summed when the whole part is handed to Keep, every byte is read
// back from memory once more, a cost paid on every cold read with the ring
// on, while summing a piece just copied, still in the caches, costs a
// fraction of summing it from memory.
//
// A Summer belongs to one buffer whose offset 0 is a block boundary, and to
// the goroutine that fills it: Advance and From are not safe for concurrent
// use. Keep trusts the sums it is given (it checks only that they cover the
// block, at the ring's grain): whoever advances a Summer over bytes
// promises that they will not change. Sums that do not match the bytes
// cost the block, never a wrong byte: a read checks every block it reads
// from the ring.
type Summer struct {
	grain   int64
	started bool
	start   int64    // the first byte summed, a multiple of grain
	done    int64    // bytes summed from start on
	sums    []uint32 // the CRC of grain i of buf is sums[i-start/grain]
}

// Summer returns a Summer for a buffer of size bytes that starts on a
// block boundary, or nil when there is no ring to write blocks to.
func (c *Cache) Summer(size int64) *Summer {
	if c.liveRing() == nil {
		return nil
	}
	grain := grainSizeFor(c.cfg.BlockSize)
	return &Summer{grain: grain, sums: make([]uint32, 0, (size+grain-1)/grain)}
}

// Advance sums the whole grains of buf that are in buf[:hi] and not yet
// summed, and the last, short grain of buf once hi is len(buf). The first
// call sets where the sums start: lo, the first byte that arrived, rounded
// down to a grain; bytes before lo are never summed. Bytes between the
// sums and lo are summed as they are.
func (s *Summer) Advance(buf []byte, lo, hi int64) {
	if s == nil {
		return
	}
	if !s.started {
		s.started, s.start = true, lo/s.grain*s.grain
	}
	end := hi / s.grain * s.grain
	if hi == int64(len(buf)) {
		end = hi
	}
	for at := s.start + s.done; at < end; at += s.grain {
		g := buf[at:min(at+s.grain, int64(len(buf)))]
		s.sums = append(s.sums, checksum(g))
		s.done += int64(len(g))
	}
}

// Sums are the grain CRCs of a run of bytes that starts on a grain
// boundary: Sums.of[i] is the CRC of its grain i.
type Sums struct {
	grain int64
	of    []uint32
}

// From returns the sums of buf[off:]: none when off is outside what was
// summed or not on a grain boundary.
func (s *Summer) From(off int64) Sums {
	if s == nil || off < s.start || off%s.grain != 0 || off > s.start+s.done {
		return Sums{}
	}
	return Sums{grain: s.grain, of: s.sums[(off-s.start)/s.grain:]}
}

// block returns the grain CRCs of the length bytes at start of the run the
// sums cover, when they are summed at grain; ok is false otherwise.
func (s Sums) block(start, length, grain int64) (g grainSums, ok bool) {
	if s.grain != grain || start%grain != 0 {
		return g, false
	}
	first, n := start/grain, (length+grain-1)/grain
	if first+n > int64(len(s.of)) || n > maxGrains {
		return g, false
	}
	copy(g[:], s.of[first:first+n])
	return g, true
}
