package listing

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/store"
)

// fakeLister answers List from a script of results and counts the calls.
type fakeLister struct {
	mu    sync.Mutex
	objs  []store.Object
	err   error
	calls int
}

func (f *fakeLister) List(ctx context.Context) ([]store.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return slices.Clone(f.objs), f.err
}

func (f *fakeLister) set(objs []store.Object, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs, f.err = objs, err
}

var quiet = slog.New(slog.DiscardHandler)

func objects(keys ...string) []store.Object {
	var out []store.Object
	for _, k := range keys {
		out = append(out, store.Object{Key: k, Size: 1, ETag: `"` + k + `"`, ModTime: time.Unix(1700000000, 0).UTC()})
	}
	return out
}

// A persisted listing serves the next Load of the same source, and of no
// other, until it is as old as the TTL. The test runs in a synctest bubble
// so that the listing's age is the time the test lets pass, exactly.
func TestPersistedListingIsReusedPerSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		src := &fakeLister{objs: objects("a", "b/c")}
		cfg := DefaultConfig()
		cfg.Dir, cfg.Key = dir, "http://minio s3://bucket/x/"
		l, err := Load(context.Background(), cfg, src, quiet)
		if err != nil || l.Origin() != FromList || src.calls != 1 {
			t.Fatalf("first load: %v, origin %s, %d lists", err, l.Origin(), src.calls)
		}
		l.Close() // waits for the listing to be persisted
		again, err := Load(context.Background(), cfg, src, quiet)
		if err != nil || again.Origin() != FromCache || src.calls != 1 {
			t.Fatalf("second load: %v, origin %s, %d lists; want the persisted copy and no LIST", err, again.Origin(), src.calls)
		}
		if !slices.Equal(again.Objects(), l.Objects()) {
			t.Fatalf("persisted listing differs:\n%v\n%v", again.Objects(), l.Objects())
		}
		other := cfg
		other.Key = "http://minio s3://bucket/y/"
		o, _ := Load(context.Background(), other, src, quiet)
		o.Close()
		if o.Origin() != FromList {
			t.Fatal("another source took this source's listing")
		}
		time.Sleep(time.Hour) // the persisted listing is an hour old
		younger := cfg
		younger.TTL = time.Hour + time.Second
		y, _ := Load(context.Background(), younger, src, quiet)
		y.Close()
		if y.Origin() != FromCache {
			t.Fatalf("a listing an hour old was not reused under a TTL of %v", younger.TTL)
		}
		expired := cfg
		expired.TTL = time.Hour
		e, _ := Load(context.Background(), expired, src, quiet)
		e.Close()
		if e.Origin() != FromList {
			t.Fatalf("a listing an hour old was reused under a TTL of %v", expired.TTL)
		}
	})
}

func TestPersistedListingCutShortIsNotUsed(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Dir, cfg.Key = dir, "src"
	first, err := Load(context.Background(), cfg, &fakeLister{objs: objects("a", "b", "c")}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	p := path(dir, "src")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw[:len(raw)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	src := &fakeLister{objs: objects("a", "b", "c")}
	l, err := Load(context.Background(), cfg, src, quiet)
	if err == nil {
		defer l.Close()
	}
	if err != nil || l.Origin() != FromList || len(l.Objects()) != 3 {
		t.Fatalf("a cut persisted listing: origin %s, %d objects, %v; want a fresh LIST", l.Origin(), len(l.Objects()), err)
	}
}

// A refresh that fails keeps the listing that stands, applies nothing, and
// is retried within the backoff's bound until the store answers again;
// that answer is applied once and counted. The refresher runs in a
// synctest bubble: its timers fire only when the test lets the bubble's
// clock reach them, and synctest.Wait returns once the refresher is idle
// again, so every check sees a refresher that has finished its attempt.
func TestFailedRefreshKeepsListingAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeLister{objs: objects("a")}
		cfg := DefaultConfig()
		cfg.TTL, cfg.RetryBase, cfg.RetryMax = time.Minute, time.Second, 2*time.Second
		// The backoff spreads each wait by up to half of it either way.
		maxWait := cfg.RetryMax * 3 / 2
		l, err := Load(context.Background(), cfg, src, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var applied [][]store.Object
		appliedSoFar := func() [][]store.Object {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(applied)
		}
		src.set(nil, errors.New("503 SlowDown"))
		l.Start(src, func(objs []store.Object) Changes {
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, objs)
			return Changes{Added: 1}
		})
		defer l.Close()

		time.Sleep(cfg.TTL) // the listing reaches the TTL: the first refresh
		synctest.Wait()
		if st := l.Stats(); st.Failures != 1 || !st.LastFailed {
			t.Fatalf("after the first refresh against a failing store: %+v, want 1 failure", st)
		}
		for want := int64(2); want <= 3; want++ {
			time.Sleep(maxWait)
			synctest.Wait()
			if got := l.Stats().Failures; got < want {
				t.Fatalf("failed refreshes: %d, want at least %d: no retry within %v of a failure", got, want, maxWait)
			}
		}
		if got := l.Objects(); len(got) != 1 || got[0].Key != "a" {
			t.Fatalf("after failed refreshes the listing is %v, want the old one", got)
		}
		if a := appliedSoFar(); len(a) != 0 {
			t.Fatalf("failed refreshes applied %v, want nothing applied", a)
		}
		if st := l.Stats(); st.Refreshes != 0 || st.Objects != 1 || !st.LastFailed {
			t.Fatalf("stats after failed refreshes: %+v", st)
		}

		src.set(objects("a", "b"), nil)
		time.Sleep(maxWait)
		synctest.Wait()
		a := appliedSoFar()
		if len(a) != 1 || len(a[0]) != 2 {
			t.Fatalf("within %v of the store coming back, applied %v; want the new listing once", maxWait, a)
		}
		if got := l.Objects(); len(got) != 2 {
			t.Fatalf("after the store came back the listing is %v, want the new one", got)
		}
		if st := l.Stats(); st.Refreshes != 1 || st.Added != 1 || st.Objects != 2 || st.LastFailed {
			t.Fatalf("stats after the refresh: %+v", st)
		}
	})
}

func TestConfigRejectsManifestWithTTL(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Manifest, cfg.TTL = "m.jsonl", time.Minute
	if err := cfg.Validate(); err == nil {
		t.Fatal("a manifest with a TTL was accepted")
	}
}
