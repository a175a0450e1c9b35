package store

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// WriteManifest writes a listing as JSON lines, one object a line, so that
// many nodes can mount the same version of a dataset without listing it.
func WriteManifest(w io.Writer, objs []Object) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, o := range objs {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadManifest reads what WriteManifest wrote. Every line must name a key
// and an ETag: a manifest without ETags could not pin content.
func ReadManifest(r io.Reader) ([]Object, error) {
	var objs []Object
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var o Object
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("manifest line %d: %w", line, err)
		}
		if o.Key == "" || o.ETag == "" || o.Size < 0 {
			return nil, fmt.Errorf("manifest line %d: want key, size and etag", line)
		}
		objs = append(objs, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	sortObjects(objs)
	return objs, nil
}
