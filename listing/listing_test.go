package listing

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardfs/shardfs/store"
)

// fakeLister answers List from a script of results and counts the calls.
type fakeLister struct {
	mu     sync.Mutex
	objs   []store.Object
	err    error
	calls  int
	listed chan struct{}
}

func (f *fakeLister) List(ctx context.Context) ([]store.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.listed != nil {
		select {
		case f.listed <- struct{}{}:
		default:
		}
	}
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

func TestPersistedListingIsReusedPerSource(t *testing.T) {
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
	expired := cfg
	expired.TTL = time.Nanosecond
	e, _ := Load(context.Background(), expired, src, quiet)
	e.Close()
	if e.Origin() != FromList {
		t.Fatal("a listing older than the TTL was reused")
	}
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

func TestFailedRefreshKeepsListingAndRetries(t *testing.T) {
	src := &fakeLister{objs: objects("a"), listed: make(chan struct{}, 1)}
	cfg := DefaultConfig()
	cfg.TTL, cfg.RetryBase, cfg.RetryMax = 20*time.Millisecond, 10*time.Millisecond, 20*time.Millisecond
	l, err := Load(context.Background(), cfg, src, quiet)
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan []store.Object, 10)
	src.set(nil, errors.New("503 SlowDown"))
	l.Start(src, func(objs []store.Object) Changes { applied <- objs; return Changes{Added: 1} })
	defer l.Close()
	deadline := time.After(10 * time.Second)
	for l.Stats().Failures < 3 {
		select {
		case <-deadline:
			t.Fatalf("failed refreshes: %d after 10 s, want retries", l.Stats().Failures)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if got := l.Objects(); len(got) != 1 || got[0].Key != "a" || len(applied) != 0 {
		t.Fatalf("after failed refreshes the listing is %v (%d applied), want the old one", got, len(applied))
	}
	src.set(objects("a", "b"), nil)
	select {
	case objs := <-applied:
		if len(objs) != 2 {
			t.Fatalf("applied %v", objs)
		}
	case <-deadline:
		t.Fatal("no refresh after the store came back")
	}
	// The stats are counted once the update returns, just after it sent.
	for st := l.Stats(); st.Refreshes < 1 || st.Added < 1 || st.Objects != 2; st = l.Stats() {
		select {
		case <-deadline:
			t.Fatalf("stats after the refresh: %+v", st)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestConfigRejectsManifestWithTTL(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Manifest, cfg.TTL = "m.jsonl", time.Minute
	if err := cfg.Validate(); err == nil {
		t.Fatal("a manifest with a TTL was accepted")
	}
}
