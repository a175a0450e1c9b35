package fs

import "github.com/hanwen/go-fuse/v2/fuse"

// lentResult is a READ reply written from bytes the read path lends. go-fuse
// writes a ReadResult that has Slices with writev(2) straight from them and
// calls Done once it has written; Bytes, the path that would release the
// bytes before writing them, copies.
type lentResult struct {
	rep reply
}

var _ fuse.ReadResult = (*lentResult)(nil)

// newReadResult wraps a reader's reply for go-fuse. Bytes with nothing to
// release (the handle's buffer, a cache block) need no Done; an empty reply
// is released at once, since go-fuse skips Done for an empty payload.
func newReadResult(rep reply) fuse.ReadResult {
	if rep.release == nil || len(rep.data) == 0 {
		rep.done()
		return fuse.ReadResultData(rep.data)
	}
	return &lentResult{rep: rep}
}

func (r *lentResult) Size() int { return len(r.rep.data) }

func (r *lentResult) Slices() ([][]byte, fuse.Status) { return [][]byte{r.rep.data}, fuse.OK }

func (r *lentResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	return append(buf[:0], r.rep.data...), fuse.OK
}

// Done releases the lent bytes; go-fuse calls it once per reply.
func (r *lentResult) Done() {
	r.rep.done()
	r.rep.release = nil
}
