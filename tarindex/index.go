package tarindex

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/shardfs/shardfs/store"
)

// maxKept bounds the rendered indexes kept in memory (a few hundred bytes
// a sample: 1,000 shards of 1,000 samples is tens of MiB); past it the
// memory starts afresh and indexes are built again when asked.
const maxKept = 1024

// Index serves the rendered member index of each shard version. It is
// safe for concurrent use.
type Index struct {
	f      Fetcher
	builds singleflight.Group

	mu   sync.Mutex
	kept map[string][]byte // by key and ETag
}

// New returns an Index that reads headers through f.
func New(f Fetcher) *Index {
	return &Index{f: f, kept: map[string][]byte{}}
}

// JSONLines returns obj's index as JSON lines, one regular member a line
// in archive order: {"name":..., "offset":..., "size":...}. Concurrent
// calls for one version share one scan.
func (x *Index) JSONLines(ctx context.Context, obj store.Object) ([]byte, error) {
	id := obj.ETag + "\x00" + obj.Key
	x.mu.Lock()
	b, ok := x.kept[id]
	x.mu.Unlock()
	if ok {
		return b, nil
	}
	v, err, _ := x.builds.Do(id, func() (any, error) {
		// One reader giving up (an interrupted open) must not fail the
		// others sharing the scan.
		members, err := Scan(context.WithoutCancel(ctx), x.f, obj)
		if err != nil {
			return nil, err
		}
		b := Render(members)
		x.mu.Lock()
		if len(x.kept) >= maxKept {
			clear(x.kept)
		}
		x.kept[id] = b
		x.mu.Unlock()
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// Render writes members as JSON lines.
func Render(members []Member) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, m := range members {
		_ = enc.Encode(m) // a Member always encodes
	}
	return buf.Bytes()
}
