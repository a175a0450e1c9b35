package prefetch

// bufPool keeps freed part buffers for reuse, by capacity, so a streaming
// mount does not hand the garbage collector a part's worth of memory per
// GET. The engine trims it so that the buffers of live parts plus
// pooled buffers never pass Config.Memory: what the pool keeps is memory
// the process holds.
type bufPool struct {
	free  map[int64][][]byte // by capacity
	bytes int64
}

// get returns a buffer of exactly size bytes, reused when one is free.
func (b *bufPool) get(size int64) []byte {
	if list := b.free[size]; len(list) > 0 {
		buf := list[len(list)-1]
		b.free[size] = list[:len(list)-1]
		b.bytes -= size
		return buf
	}
	return make([]byte, size)
}

// put keeps buf for reuse.
func (b *bufPool) put(buf []byte) {
	if b.free == nil {
		b.free = map[int64][][]byte{}
	}
	buf = buf[:cap(buf)]
	b.free[int64(len(buf))] = append(b.free[int64(len(buf))], buf)
	b.bytes += int64(len(buf))
}

// trim drops buffers until the pool holds at most limit bytes, largest
// sizes first (they are the most memory per buffer dropped).
func (b *bufPool) trim(limit int64) {
	for b.bytes > max(limit, 0) {
		var biggest int64
		for size, list := range b.free {
			if len(list) > 0 && size > biggest {
				biggest = size
			}
		}
		list := b.free[biggest]
		list[len(list)-1] = nil
		b.free[biggest] = list[:len(list)-1]
		b.bytes -= biggest
	}
}
