// Package storetest holds the conformance suite that every store.Store
// passes, and Mem, an in-process store for fast unit tests of the packages
// above store. Mem is a test double: the mount never uses it.
package storetest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardfs/shardfs/store"
)

// Mem is an in-memory Store. It counts ranged reads and the bytes they
// returned so tests can assert how much a read path fetched.
type Mem struct {
	mu      sync.Mutex
	objects map[string][]byte
	etags   map[string]string

	Reads     atomic.Int64 // ReadRange calls
	ReadBytes atomic.Int64 // bytes returned by ReadRange

	// Hook, when set, runs at the start of every ReadRange; a non-nil error
	// is returned instead of the bytes (fault injection).
	Hook func(key string, off int64, n int) error
	// Cut, when set, runs after Hook; a non-nil error ends the read after
	// keep bytes, as a connection reset mid-body does.
	Cut func(key string, off int64, n int) (keep int, err error)
}

var _ store.Store = (*Mem)(nil)

func NewMem() *Mem {
	return &Mem{objects: map[string][]byte{}, etags: map[string]string{}}
}

// Put stores (or replaces) an object; replacing changes its ETag.
func (m *Mem) Put(key string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sum := md5.Sum(data)
	m.objects[key] = append([]byte(nil), data...)
	m.etags[key] = `"` + hex.EncodeToString(sum[:]) + `"`
}

func (m *Mem) String() string { return "mem://" }

func (m *Mem) List(ctx context.Context) ([]store.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	objs := make([]store.Object, 0, len(m.objects))
	for k := range m.objects {
		objs = append(objs, m.objectLocked(k))
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

func (m *Mem) Stat(ctx context.Context, key string) (store.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; !ok {
		return store.Object{}, fmt.Errorf("stat %s: %w", key, store.ErrNotFound)
	}
	return m.objectLocked(key), nil
}

func (m *Mem) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if m.Hook != nil {
		if err := m.Hook(obj.Key, off, len(p)); err != nil {
			return 0, err
		}
	}
	m.mu.Lock()
	data, ok := m.objects[obj.Key]
	etag := m.etags[obj.Key]
	m.mu.Unlock()
	if !ok || etag != obj.ETag {
		return 0, fmt.Errorf("read %s: %w", obj.Key, store.ErrChanged)
	}
	if off < 0 || off > int64(len(data)) {
		return 0, fmt.Errorf("read %s at %d: %w", obj.Key, off, store.ErrInvalidRange)
	}
	m.Reads.Add(1)
	if m.Cut != nil {
		if keep, err := m.Cut(obj.Key, off, len(p)); err != nil {
			n := copy(p[:min(keep, len(p))], data[off:])
			m.ReadBytes.Add(int64(n))
			store.ReportProgress(ctx, n)
			return n, err
		}
	}
	n := copy(p, data[off:])
	m.ReadBytes.Add(int64(n))
	store.ReportProgress(ctx, n)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *Mem) objectLocked(key string) store.Object {
	return store.Object{Key: key, Size: int64(len(m.objects[key])), ETag: m.etags[key], ModTime: time.Unix(1700000000, 0)}
}
