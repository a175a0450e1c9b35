package tarindex

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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

// Scan lists the regular members of obj, a tar archive, reading its headers
// through f. It fails on an archive that is not tar, naming the offset.
//
// Listed, as Python's tarfile lists them with isfile(): regular files
// (types '0', NUL and '7'), under the name a PAX or GNU long-name header
// gives. Left out: directories, links, devices, and sparse files, whose
// data is not one run of bytes.
func Scan(ctx context.Context, f Fetcher, obj store.Object) ([]Member, error) {
	r := newHeaderReader(ctx, f, obj)
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
		if isContiguousFile(h) {
			// tar.Reader reads a header's blocks straight from r and keeps
			// nothing buffered: r's position is where the data starts.
			members = append(members, Member{Name: h.Name, Offset: r.pos, Size: h.Size})
		}
	}
}

// isContiguousFile reports whether h is a regular file whose data is the
// Size bytes after its header.
func isContiguousFile(h *tar.Header) bool {
	if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeCont {
		return false
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return false
		}
	}
	return true
}

// Fetch sizes of the header reader. A tar reader skips a member's data by
// seeking to its last byte and reading that byte, then reads the padding
// and the next 512-byte header: minFetch from there covers both. Where
// small members (a sample's .json and .cls) lie between two headers, the
// reader's next read lands just past what it fetched; the fetch size then
// grows to what would have covered that read too, up to maxFetch, so a
// WebDataset sample costs one GET of about twice its header bytes.
const (
	minFetch = 1 << 10
	maxFetch = 8 << 10
)

// headerReader is an io.ReadSeeker over obj for a tar reader that wants
// only headers: seeks (skipping member data) cost nothing, and a read
// outside what was fetched makes one small ranged read.
type headerReader struct {
	ctx context.Context
	f   Fetcher
	obj store.Object
	pos int64

	buf    []byte // fetched bytes, at bufOff
	bufOff int64
	fetch  int // bytes the next ranged read asks for
}

func newHeaderReader(ctx context.Context, f Fetcher, obj store.Object) *headerReader {
	return &headerReader{ctx: ctx, f: f, obj: obj, buf: make([]byte, 0, maxFetch), fetch: minFetch}
}

func (r *headerReader) Read(p []byte) (int, error) {
	if r.pos >= r.obj.Size {
		return 0, io.EOF
	}
	if end := r.bufOff + int64(len(r.buf)); r.pos < r.bufOff || r.pos >= end {
		if len(r.buf) > 0 && r.pos >= end && r.pos-end < maxFetch {
			// A near miss: this read would have come from a larger fetch.
			r.fetch = int(min(maxFetch, max(int64(r.fetch), r.pos+minFetch-r.bufOff)))
		}
		r.buf = r.buf[:min(int64(r.fetch), r.obj.Size-r.pos)]
		n, err := r.f.ReadRange(r.ctx, r.obj, r.pos, r.buf)
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

func (r *headerReader) Seek(off int64, whence int) (int64, error) {
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
