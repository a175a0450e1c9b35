package store

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"runtime"
	"slices"

	fastjson "github.com/goccy/go-json"
	"golang.org/x/sync/errgroup"
)

// WriteManifest writes a listing as JSON lines, one object a line, so that
// many nodes can mount the same version of a dataset without listing it.
func WriteManifest(w io.Writer, objs []Object) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := fastjson.NewEncoder(bw)
	for _, o := range objs {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// maxManifestLine bounds one line: an object is a few hundred bytes, and a
// file that is not a manifest must not be read whole into memory.
const maxManifestLine = 1 << 20

// manifestChunk is how many bytes of whole lines one decoder takes.
const manifestChunk = 1 << 20

// ReadManifest reads what WriteManifest wrote. Every line must name a key
// and an ETag: a manifest without ETags could not pin content.
//
// Decoding is what mounting a large manifest spends its time on: lines are
// decoded with goccy/go-json, a drop-in for encoding/json that decodes
// them in a fraction of its time, in chunks of whole lines on every core
// at once. The result is the listing in file order,
// and an error names the first bad line. A manifest that comes sorted
// (WriteManifest's always does) is not sorted again.
func ReadManifest(r io.Reader) ([]Object, error) {
	br := bufio.NewReaderSize(r, maxManifestLine)
	var parts []*manifestPart
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	var readErr error
	for line := 1; readErr == nil; {
		part := &manifestPart{line: line}
		part.data, line, readErr = readLines(br, line)
		if len(part.data) > 0 {
			parts = append(parts, part)
			g.Go(part.decode) // waits while every core decodes
		}
	}
	_ = g.Wait() // parts keep their own errors, to report the first by line
	if readErr != io.EOF {
		return nil, readErr
	}
	n := 0
	for _, p := range parts {
		if p.err != nil {
			return nil, p.err
		}
		n += len(p.objs)
	}
	objs := make([]Object, 0, n)
	for _, p := range parts {
		objs = append(objs, p.objs...)
	}
	if !slices.IsSortedFunc(objs, compareKeys) {
		sortObjects(objs)
	}
	return objs, nil
}

// readLines reads whole lines, numbered from line, until it holds about
// manifestChunk bytes. It returns the number of the next line, and io.EOF
// at the end of the input.
func readLines(br *bufio.Reader, line int) ([]byte, int, error) {
	buf := make([]byte, 0, manifestChunk+maxManifestLine)
	for len(buf) < manifestChunk {
		text, err := br.ReadSlice('\n')
		buf = append(buf, text...)
		switch {
		case err == bufio.ErrBufferFull:
			return nil, line, fmt.Errorf("manifest line %d: longer than %d bytes", line, maxManifestLine)
		case err != nil && err != io.EOF:
			return nil, line, fmt.Errorf("reading manifest: %w", err)
		case err == io.EOF:
			return buf, line + 1, io.EOF
		}
		line++
	}
	return buf, line, nil
}

// manifestPart is a run of whole lines starting at line number line.
type manifestPart struct {
	data []byte
	line int
	objs []Object
	err  error // the part's first bad line
}

func (p *manifestPart) decode() error {
	data, line := p.data, p.line
	p.data = nil
	p.objs = make([]Object, 0, bytes.Count(data, []byte{'\n'})+1)
	for ; len(data) > 0; line++ {
		var text []byte
		text, data, _ = bytes.Cut(data, []byte{'\n'})
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		var o Object
		if err := fastjson.Unmarshal(text, &o); err != nil {
			p.err = fmt.Errorf("manifest line %d: %w", line, err)
			return nil
		}
		if o.Key == "" || o.ETag == "" || o.Size < 0 {
			p.err = fmt.Errorf("manifest line %d: want key, size and etag", line)
			return nil
		}
		p.objs = append(p.objs, o)
	}
	return nil
}
