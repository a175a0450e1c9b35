package listing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/shardfs/shardfs/store"
)

// Lister is what a listing is taken from (a store.Store, usually wrapped
// for retries and counting).
type Lister interface {
	List(ctx context.Context) ([]store.Object, error)
}

// Origin is where the mount's first listing came from.
type Origin string

const (
	FromList     Origin = "list"     // the store listed it
	FromCache    Origin = "cache"    // a persisted copy, no LIST sent
	FromManifest Origin = "manifest" // the --manifest file
)

// Listing is a mount's listing, current as of its last successful refresh.
type Listing struct {
	cfg    Config
	log    *slog.Logger
	origin Origin

	mu       sync.Mutex
	objs     []store.Object
	listedAt time.Time

	saveMu sync.Mutex     // one persist at a time
	saving sync.WaitGroup // the persist Load started

	refreshes, failures     atomic.Int64
	added, removed, changed atomic.Int64
	lastFailed              atomic.Bool
	stop                    context.CancelFunc
	done                    chan struct{}
}

// Load takes the mount's first listing (see the package doc for the
// order). Errors from the store come back wrapped, so errors.Is finds the
// store's sentinels.
func Load(ctx context.Context, cfg Config, src Lister, log *slog.Logger) (*Listing, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Listing{cfg: cfg, log: log}
	if cfg.Manifest != "" {
		f, err := os.Open(cfg.Manifest)
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		defer f.Close()
		if l.objs, err = store.ReadManifest(f); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", cfg.Manifest, err)
		}
		l.origin, l.listedAt = FromManifest, time.Now()
		return l, nil
	}
	if cfg.Dir != "" {
		objs, at, err := load(cfg.Dir, cfg.Key)
		switch {
		case err == nil && (cfg.TTL == 0 || time.Since(at) < cfg.TTL):
			log.Info("listing taken from the cache dir, no LIST sent", "source", cfg.Key, "objects", len(objs),
				"listed", at.Format(time.RFC3339), "file", path(cfg.Dir, cfg.Key),
				"note", "set --metadata-ttl, or remove the file, to list the source again")
			l.objs, l.listedAt, l.origin = objs, at, FromCache
			return l, nil
		case err == nil:
			log.Info("persisted listing is older than --metadata-ttl; listing again", "listed", at.Format(time.RFC3339))
		case !errors.Is(err, errNoCopy):
			log.Warn("persisted listing unusable; listing again", "err", err)
		}
	}
	at := time.Now()
	objs, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	l.objs, l.listedAt, l.origin = objs, at, FromList
	// Writing a million objects takes a while; the mount need not wait.
	l.saving.Add(1)
	go func() {
		defer l.saving.Done()
		l.persist()
	}()
	return l, nil
}

// Objects is the listing as it stands, sorted by key. The slice is never
// changed afterwards; a refresh makes a new one.
func (l *Listing) Objects() []store.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.objs
}

// Origin is where the first listing came from.
func (l *Listing) Origin() Origin { return l.origin }

// persist saves the listing in the cache dir, if there is one. A failure
// costs the next mount a LIST, nothing more: it is logged, not returned.
func (l *Listing) persist() {
	if l.cfg.Dir == "" || l.origin == FromManifest {
		return
	}
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock() // the listing as it stands now, however late this runs
	objs, at := l.objs, l.listedAt
	l.mu.Unlock()
	if err := save(l.cfg.Dir, l.cfg.Key, objs, at); err != nil {
		l.log.Warn("cannot persist the listing; the next mount will list again", "effect", "listing not persisted", "err", err)
	}
}

// Changes is what a refresh found; the mount applies the new listing and
// reports them back.
type Changes struct {
	Added, Removed, Changed int
}

// Start refreshes the listing every TTL from src, handing each new listing
// to apply, until Close. Without a TTL (or with a manifest) it does
// nothing. apply runs on the refresher goroutine, one call at a time.
func (l *Listing) Start(src Lister, apply func([]store.Object) Changes) {
	if l.cfg.TTL == 0 || l.origin == FromManifest {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stop, l.done = cancel, make(chan struct{})
	go l.refreshLoop(ctx, src, apply)
}

// Close stops the refresher and waits for it and for the first persist.
func (l *Listing) Close() {
	if l.stop != nil {
		l.stop()
		<-l.done
	}
	l.saving.Wait()
}

// refreshLoop owns the refresh: it waits until the listing reaches the TTL,
// lists, and on failure waits out a growing backoff and tries again.
func (l *Listing) refreshLoop(ctx context.Context, src Lister, apply func([]store.Object) Changes) {
	defer close(l.done)
	retry := backoff.NewExponentialBackOff()
	retry.InitialInterval, retry.MaxInterval, retry.MaxElapsedTime = l.cfg.RetryBase, l.cfg.RetryMax, 0
	retry.Reset()
	l.mu.Lock()
	wait := time.Until(l.listedAt.Add(l.cfg.TTL))
	l.mu.Unlock()
	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		at := time.Now()
		objs, err := src.List(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			l.failures.Add(1)
			l.lastFailed.Store(true)
			delay := retry.NextBackOff()
			l.log.Warn("refreshing the listing failed; the listing that stands is kept", "err", err, "retry_in", delay.Round(time.Millisecond))
			timer.Reset(delay)
			continue
		}
		retry.Reset()
		l.mu.Lock()
		l.objs, l.listedAt = objs, at
		l.mu.Unlock()
		ch := apply(objs)
		l.refreshes.Add(1)
		l.lastFailed.Store(false)
		l.added.Add(int64(ch.Added))
		l.removed.Add(int64(ch.Removed))
		l.changed.Add(int64(ch.Changed))
		l.log.Info("listing refreshed", "objects", len(objs), "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed, "took", time.Since(at).Round(time.Millisecond))
		l.persist()
		timer.Reset(l.cfg.TTL)
	}
}

// Stats are the listing's figures for the mount's stats.
type Stats struct {
	Origin                  Origin
	Objects                 int
	Age                     time.Duration // since the listing that stands was taken
	Refreshes, Failures     int64         // refreshes that succeeded, attempts that failed
	Added, Removed, Changed int64         // objects, summed over refreshes
	LastFailed              bool          // the latest attempt failed
}

func (l *Listing) Stats() Stats {
	l.mu.Lock()
	n, at := len(l.objs), l.listedAt
	l.mu.Unlock()
	return Stats{
		Origin: l.origin, Objects: n, Age: time.Since(at),
		Refreshes: l.refreshes.Load(), Failures: l.failures.Load(),
		Added: l.added.Load(), Removed: l.removed.Load(), Changed: l.changed.Load(),
		LastFailed: l.lastFailed.Load(),
	}
}
