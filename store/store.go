// Package store owns the backends that hold shard bytes: an S3-compatible
// bucket (AWS S3, MinIO, Ceph RGW) through aws-sdk-go-v2, and a local or NFS
// directory. It lists objects and reads byte ranges of one object version.
//
// Every backend implements Store and passes the conformance suite in
// store/storetest. Behaviour shared by all backends (retries with backoff,
// counting) lives in wrappers around a Store, never inside one backend.
//
// This package never caches, never prefetches and never knows about FUSE.
// It is the only package that imports the AWS SDK.
package store

import (
	"context"
	"time"
)

// Object is one immutable version of a shard: the key relative to the
// source root, its size, and the ETag that pins its content.
type Object struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	ETag    string    `json:"etag"`
	ModTime time.Time `json:"mtime"`
}

// Store is a read-only view of the objects under one source root.
type Store interface {
	// List returns every object under the root, sorted by key. Keys are
	// relative to the root and use "/" as separator.
	List(ctx context.Context) ([]Object, error)

	// Stat returns the current version of one object.
	Stat(ctx context.Context, key string) (Object, error)

	// ReadRange fills p with the bytes of obj starting at off. It reads
	// exactly len(p) bytes unless the range passes the end of the object, in
	// which case it returns the bytes up to the end and io.EOF. The read is
	// pinned to obj.ETag: if the object changed, it returns ErrChanged and
	// never bytes of another version.
	ReadRange(ctx context.Context, obj Object, off int64, p []byte) (int, error)

	// String names the source, e.g. "s3://bucket/prefix" or "/data/shards".
	String() string
}
