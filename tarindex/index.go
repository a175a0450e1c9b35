package tarindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/shardfs/shardfs/store"
)

// Finder finds an object of the listing by key: where an Index looks for
// sidecar indexes. nil finds none. (An alias, so that a caller's own
// function type of this shape takes JSONLines as it is.)
type Finder = func(key string) (store.Object, bool)

// Stats counts how indexes were served.
type Stats struct {
	Memory           int64 // asks served from memory
	Persisted        int64 // indexes read from the cache dir
	Sidecars         int64 // indexes taken from a sidecar after its check
	Scans            int64 // indexes built by reading the shard's headers
	SidecarsRejected int64 // sidecars that disagreed with their shard (each logged)
	PersistedCorrupt int64 // persisted indexes that failed their checksum, rebuilt (each logged)
	PersistFailures  int64 // indexes that could not be written to the cache dir
	MemoryBytes      int64 // rendered indexes held in memory now
}

// Index serves the rendered member index of each shard version. It is
// safe for concurrent use.
type Index struct {
	f      Fetcher
	cfg    Config
	log    *slog.Logger
	builds singleflight.Group

	mu       sync.Mutex
	kept     *memory             // by key and ETag
	rejected map[string]struct{} // sidecar versions that failed their check: read and warned of once

	memoryHits, persisted, sidecars, scans         atomic.Int64
	sidecarsRejected, persistedCorrupt, persistErr atomic.Int64
}

// New returns an Index that reads headers and sidecars through f.
func New(f Fetcher, cfg Config) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &Index{f: f, cfg: cfg, log: log, kept: newMemory(cfg.Memory), rejected: map[string]struct{}{}}, nil
}

// JSONLines returns obj's index as JSON lines, one regular member a line
// in archive order: {"name":..., "offset":..., "size":...}. It is, the
// first that applies: the copy in memory, the copy persisted in the cache
// dir, a sidecar index that find finds beside obj and that passes its
// check, or a scan of obj's headers. Concurrent calls for one version share
// one build.
func (x *Index) JSONLines(ctx context.Context, obj store.Object, find Finder) ([]byte, error) {
	id := obj.ETag + "\x00" + obj.Key
	x.mu.Lock()
	b, ok := x.kept.get(id)
	x.mu.Unlock()
	if ok {
		x.memoryHits.Add(1)
		return b, nil
	}
	v, err, _ := x.builds.Do(id, func() (any, error) {
		// One reader giving up (an interrupted open) must not fail the
		// others sharing the build.
		b, err := x.build(context.WithoutCancel(ctx), obj, find)
		if err != nil {
			return nil, err
		}
		x.mu.Lock()
		x.kept.put(id, b)
		x.mu.Unlock()
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// build finds or makes obj's index when memory has none.
func (x *Index) build(ctx context.Context, obj store.Object, find Finder) ([]byte, error) {
	if x.cfg.Dir != "" {
		b, err := load(x.cfg.Dir, x.cfg.Source, obj)
		if err == nil {
			x.persisted.Add(1)
			return b, nil
		}
		if !errors.Is(err, errStale) {
			x.persistedCorrupt.Add(1)
			x.log.Warn("persisted member index not used; building it again", "key", obj.Key, "err", err)
		}
	}
	members, err := x.fromSidecar(ctx, obj, find)
	if members == nil && err == nil {
		members, err = Scan(ctx, x.f, obj)
		x.scans.Add(1)
	}
	if err != nil {
		return nil, err
	}
	b := Render(members)
	if x.cfg.Dir != "" {
		if err := save(x.cfg.Dir, x.cfg.Source, obj, b); err != nil {
			x.persistErr.Add(1)
			x.log.Warn("cannot persist member index", "key", obj.Key, "err", err)
		}
	}
	return b, nil
}

// fromSidecar returns the members a sidecar of obj lists, when one is
// found and passes its check; nil otherwise. A sidecar that disagrees with
// the shard is logged and counted.
func (x *Index) fromSidecar(ctx context.Context, obj store.Object, find Finder) ([]Member, error) {
	if find == nil {
		return nil, nil
	}
	for _, key := range SidecarKeys(obj.Key) {
		side, ok := find(key)
		if !ok || side.Key == obj.Key || x.wasRejected(side) {
			continue
		}
		members, err := x.readSidecar(ctx, obj, side)
		switch {
		case err == nil:
			x.sidecars.Add(1)
			return members, nil
		case errors.Is(err, context.Canceled):
			return nil, err
		case errors.Is(err, errSidecarUnchecked):
			x.log.Debug("sidecar index not used", "key", obj.Key, "sidecar", side.Key, "why", err)
		default:
			x.reject(side)
			x.sidecarsRejected.Add(1)
			x.log.Warn("sidecar index disagrees with its shard; scanning the shard instead", "key", obj.Key, "sidecar", side.Key, "err", err)
		}
	}
	return nil, nil
}

// maxRejected bounds the sidecar versions remembered as rejected; past it
// they are forgotten, and a bad one is read and warned of again.
const maxRejected = 4096

func (x *Index) wasRejected(side store.Object) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.rejected[side.ETag+"\x00"+side.Key]
	return ok
}

func (x *Index) reject(side store.Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.rejected) >= maxRejected {
		clear(x.rejected)
	}
	x.rejected[side.ETag+"\x00"+side.Key] = struct{}{}
}

func (x *Index) readSidecar(ctx context.Context, obj, side store.Object) ([]Member, error) {
	if side.Size > sidecarMax {
		return nil, errors.New("sidecar larger than 64 MiB")
	}
	data := make([]byte, side.Size)
	if _, err := x.f.ReadRange(ctx, side, 0, data); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", errSidecarUnchecked, err)
	}
	members, err := parseSidecar(data)
	if err != nil {
		return nil, err
	}
	return members, checkSidecar(ctx, x.f, obj, members)
}

// Stats returns the counts so far.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	used := x.kept.used
	x.mu.Unlock()
	return Stats{
		Memory: x.memoryHits.Load(), Persisted: x.persisted.Load(), Sidecars: x.sidecars.Load(), Scans: x.scans.Load(),
		SidecarsRejected: x.sidecarsRejected.Load(), PersistedCorrupt: x.persistedCorrupt.Load(),
		PersistFailures: x.persistErr.Load(), MemoryBytes: used,
	}
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
