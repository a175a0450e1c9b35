package tarindex

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shardfs/shardfs/store"
)

// Fetcher reads bytes of one object version; store.Store satisfies it.
type Fetcher interface {
	ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error)
}

// Member is one regular file of a tar archive: its data is the Size bytes
// at Offset.
type Member struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
}

// window is what one ranged read brings: a header and the small members
// that follow it (a sample's .json and .cls lie in the same window).
const window = 16 << 10

// Scan lists the regular members of obj, a tar archive, reading its headers
// through f. It fails on an archive that is not tar, naming the offset.
func Scan(ctx context.Context, f Fetcher, obj store.Object) ([]Member, error) {
	r := &rangeReader{ctx: ctx, f: f, obj: obj}
	tr := tar.NewReader(r)
	var members []Member
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return members, nil
		}
		if err != nil {
			return nil, fmt.Errorf("index %s: after %d members, at byte %d: %w", obj.Key, len(members), r.pos, err)
		}
		if h.Typeflag == tar.TypeReg {
			// tar.Reader reads a header's blocks straight from r and keeps
			// nothing buffered: r's position is where the data starts.
			members = append(members, Member{Name: h.Name, Offset: r.pos, Size: h.Size})
		}
	}
}

// rangeReader is an io.ReadSeeker over obj that fetches a window at a
// time; seeks (tar skipping member data) cost nothing until the next read.
type rangeReader struct {
	ctx context.Context
	f   Fetcher
	obj store.Object
	pos int64

	buf    []byte
	bufOff int64
	Reads  int // ranged reads made
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.pos >= r.obj.Size {
		return 0, io.EOF
	}
	if r.pos < r.bufOff || r.pos >= r.bufOff+int64(len(r.buf)) {
		if r.buf == nil {
			r.buf = make([]byte, window)
		}
		r.buf = r.buf[:min(window, r.obj.Size-r.pos)]
		n, err := r.f.ReadRange(r.ctx, r.obj, r.pos, r.buf)
		r.Reads++
		if err != nil && !(errors.Is(err, io.EOF) && n == len(r.buf)) {
			r.buf = r.buf[:0]
			return 0, err
		}
		r.buf, r.bufOff = r.buf[:n], r.pos
	}
	n := copy(p, r.buf[r.pos-r.bufOff:])
	r.pos += int64(n)
	return n, nil
}

func (r *rangeReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.obj.Size
	}
	if off < 0 {
		return 0, fmt.Errorf("index %s: seek to %d", r.obj.Key, off)
	}
	r.pos = off
	return off, nil
}
