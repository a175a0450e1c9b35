package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/listing"
	"github.com/shardfs/shardfs/store"
)

// backend is an opened source: the raw store for counting, the store the
// read path uses (retries around counting around the backend), and the
// listing.
type backend struct {
	src     store.Source
	meter   *store.Metered
	retry   *store.Retry
	listing *listing.Listing
	objects []store.Object // the first listing
}

// cacheNames is where the cache files the source's objects: an S3
// source's keys under its bucket (its prefix becomes part of every key),
// so that one warm of a bucket serves mounts of its prefixes; a local
// source under its directory.
func (b *backend) cacheNames() (namespace, keyPrefix string) {
	if b.src.IsS3() {
		return store.Source{Bucket: b.src.Bucket}.String(), b.src.Prefix
	}
	return b.retry.String(), ""
}

// openStore parses SOURCE and builds its store, without listing it.
func openStore(ctx context.Context, cfg sourceConfig, arg string, log *slog.Logger) (*backend, error) {
	src, err := store.ParseSource(arg)
	if err != nil {
		return nil, err
	}
	var raw store.Store
	if src.IsS3() {
		raw, err = store.NewS3(ctx, src, cfg.S3)
	} else {
		raw, err = store.NewLocal(src.Dir)
	}
	if err != nil {
		return nil, describeSourceError(cfg, src, err)
	}
	b := &backend{src: src, meter: store.WithMetering(raw)}
	b.retry = store.WithRetry(b.meter, cfg.Retry, log)
	return b, nil
}

// openSource opens SOURCE and takes its listing (see package listing).
// Failures come back as one line that names the problem.
func openSource(ctx context.Context, cfg sourceConfig, arg string, log *slog.Logger) (*backend, error) {
	b, err := openStore(ctx, cfg, arg, log)
	if err != nil {
		return nil, err
	}
	return b, b.list(ctx, cfg, log)
}

// list takes the first listing. It retries briefly: a wrong endpoint or
// bucket should fail in seconds, not after the read path's whole budget.
func (b *backend) list(ctx context.Context, cfg sourceConfig, log *slog.Logger) error {
	lc := cfg.Listing
	lc.Key = b.retry.String()
	if b.src.IsS3() {
		lc.Key = cmp.Or(cfg.S3.Endpoint, "AWS S3") + " " + lc.Key
	}
	if lc.Dir != "" {
		// Listings persist in the cache dir: read one only from a dir of
		// the user's own, as the ring is.
		if err := cachedir.CheckDir(lc.Dir); err != nil {
			return err
		}
	}
	startup := store.WithRetry(b.meter, store.RetryPolicy{Attempts: 3, BaseDelay: 200 * time.Millisecond, MaxDelay: time.Second}, log)
	l, err := listing.Load(ctx, lc, startup, log)
	if err != nil {
		if lc.Manifest != "" {
			return fmt.Errorf("--%w", err)
		}
		return describeSourceError(cfg, b.src, err)
	}
	b.listing, b.objects = l, l.Objects()
	return nil
}

// describeSourceError turns a backend failure into the line a user reads.
func describeSourceError(cfg sourceConfig, src store.Source, err error) error {
	endpoint := cfg.S3.Endpoint
	if endpoint == "" {
		endpoint = "AWS S3"
	}
	switch {
	case errors.Is(err, store.ErrNoBucket):
		return fmt.Errorf("no such bucket %q at %s", src.Bucket, endpoint)
	case errors.Is(err, store.ErrDenied):
		return fmt.Errorf("access denied to %s at %s: check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, --profile)", src, endpoint)
	case errors.Is(err, store.ErrNoCredentials):
		return fmt.Errorf("no AWS credentials found for %s: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or --profile", src)
	case errors.Is(err, store.ErrUnreachable):
		return fmt.Errorf("cannot connect to endpoint %s: %s", endpoint, rootCause(err))
	case errors.Is(err, store.ErrNotFound) && !src.IsS3():
		return fmt.Errorf("source directory %s does not exist", src.Dir)
	}
	return fmt.Errorf("listing %s: %w", src, err)
}

// rootCause digs out the network error's own words ("connection refused").
func rootCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil && op.Addr != nil {
		return op.Op + " " + op.Addr.String() + ": " + rootErr(op.Err).Error()
	}
	return rootErr(err).Error()
}

func rootErr(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
