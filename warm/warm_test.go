package warm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/store/storetest"
)

// bs is the tests' cache block; their parts are four blocks.
const bs = 64 << 10

var testConfig = Config{PartSize: 4 * bs, Concurrency: 3}

// newCache opens a cache with a ring of 512 blocks in a temporary dir, no
// RAM tier (every read of a block reads the ring and checks it), and
// wholePercent of it kept for whole-shard files.
func newCache(t *testing.T, wholePercent int) *cache.Cache {
	t.Helper()
	cfg := cache.DefaultConfig()
	cfg.Dir, cfg.Size, cfg.SizeGiven = t.TempDir(), 512*bs, true
	cfg.MemorySize, cfg.BlockSize, cfg.WholeShardPercent = 0, bs, wholePercent
	cfg.Namespace = "test://warm/"
	c, err := cache.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore holds one object of each size, named shard-0, shard-1, ..., of
// random bytes, and returns its listing.
func newStore(t *testing.T, sizes ...int) (*storetest.Mem, []store.Object) {
	t.Helper()
	m := storetest.NewMem()
	rng := rand.New(rand.NewPCG(uint64(len(sizes)), 7))
	for i, size := range sizes {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		m.Put(fmt.Sprintf("shard-%d", i), data)
	}
	objs, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m, objs
}

// storeBytes returns obj's bytes in m.
func storeBytes(t *testing.T, m *storetest.Mem, obj store.Object) []byte {
	t.Helper()
	data := make([]byte, obj.Size)
	if _, err := m.ReadRange(context.Background(), obj, 0, data); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return data
}

// run is Run, which must not refuse cfg.
func run(t *testing.T, ctx context.Context, p Plan, f prefetch.Fetcher, c *cache.Cache, cfg Config) Result {
	t.Helper()
	res, err := Run(ctx, p, f, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// get is one GET a store served.
type get struct {
	key     string
	off, n  int64
	failing bool
}

// recordGets makes m record the GETs it serves, and fail those of the
// keys in failing with errFailing.
func recordGets(m *storetest.Mem, failing ...string) func() []get {
	var mu sync.Mutex
	var gets []get
	m.Hook = func(key string, off int64, n int) error {
		mu.Lock()
		defer mu.Unlock()
		fail := slices.Contains(failing, key)
		gets = append(gets, get{key, off, int64(n), fail})
		if fail {
			return errFailing
		}
		return nil
	}
	return func() []get {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(gets)
	}
}

var errFailing = errors.New("injected GET failure")

// The plan counts what the ring holds as cached, and the warm fetches
// nothing of it: a shard the ring holds whole is not read at all, and of a
// shard partly held only the missing blocks are fetched, the others read
// back from the ring.
func TestPlanSkipsWhatTheRingHolds(t *testing.T) {
	c := newCache(t, 0)
	m, objs := newStore(t, 9*bs+100, 3*bs)
	partial, whole := objs[0], objs[1]
	c.Put(whole, 0, storeBytes(t, m, whole), cache.ForReadAhead)
	c.Put(partial, 1, storeBytes(t, m, partial)[bs:3*bs], cache.ForReadAhead)
	before := c.Stats().RingBytesRead

	p := PlanCache(c, objs)
	if p.Cached != whole.Size+2*bs || p.Missing != partial.Size-2*bs {
		t.Fatalf("plan: %d bytes cached, %d missing; want %d and %d", p.Cached, p.Missing, whole.Size+2*bs, partial.Size-2*bs)
	}
	if p.Shards[0].Missing != partial.Size-2*bs || p.Shards[1].Missing != 0 {
		t.Fatalf("plan's shards: %+v", p.Shards)
	}

	gets, sent := recordGets(m), m.ReadBytes.Load()
	res := run(t, context.Background(), p, m, c, testConfig)
	sent = m.ReadBytes.Load() - sent
	for _, g := range gets() {
		if g.key != partial.Key || g.off < 3*bs && g.off+g.n > bs {
			t.Errorf("GET of %s [%d, %d): the ring holds it", g.key, g.off, g.off+g.n)
		}
	}
	if res.Fetched != p.Missing || sent != p.Missing || res.Skipped != p.Cached || res.Done != 2 {
		t.Errorf("result %+v, store sent %d bytes; want %d fetched, %d skipped, 2 done", res, sent, p.Missing, p.Cached)
	}
	if got := c.Stats().RingBytesRead - before; got != 2*bs {
		t.Errorf("the warm read %d bytes from the ring, want the %d of the partly cached shard", got, 2*bs)
	}
	if again := PlanCache(c, objs); again.Missing != 0 {
		t.Errorf("after the warm the ring lacks %d bytes", again.Missing)
	}
}

// A GET that fails fails its shard, named in the result with the store's
// error; the other shards are warmed.
func TestFailingGETNamesItsShard(t *testing.T) {
	c := newCache(t, 0)
	m, objs := newStore(t, 5*bs, 6*bs+1, 2*bs)
	recordGets(m, objs[1].Key)
	res := run(t, context.Background(), PlanCache(c, objs), m, c, testConfig)
	if keys := res.FailedKeys(); !slices.Equal(keys, []string{objs[1].Key}) || !errors.Is(res.Failed[objs[1].Key], errFailing) {
		t.Fatalf("failed %v (%v), want only %s with the store's error", keys, res.Failed, objs[1].Key)
	}
	if res.Done != 2 || res.Shards != 3 {
		t.Errorf("%d of %d shards done, want 2 of 3", res.Done, res.Shards)
	}
	if again := PlanCache(c, []store.Object{objs[0], objs[2]}); again.Missing != 0 {
		t.Errorf("the shards that did not fail lack %d bytes in the ring", again.Missing)
	}
}

// What the warm leaves in the ring is the store's bytes, read back through
// the cache's own checked read path, written with the CRCs summed as they
// arrived; and each shard is kept as a whole-shard file of the same bytes.
func TestRingHoldsTheStoresBytesSummedOnArrival(t *testing.T) {
	c := newCache(t, 50)
	m, objs := newStore(t, 9*bs+777, 4*bs, bs-5)
	res := run(t, context.Background(), PlanCache(c, objs), m, c, testConfig)
	if res.Done != 3 || res.Whole != 3 || len(res.Failed) != 0 {
		t.Fatalf("result %+v, want 3 shards done and whole", res)
	}
	var blocks uint64
	for _, obj := range objs {
		blocks += uint64((obj.Size + bs - 1) / bs)
		want := storeBytes(t, m, obj)
		got := make([]byte, obj.Size)
		if n, ok := c.ReadAt(obj, got, 0, cache.ForReadAhead); !ok || n != len(got) || !bytes.Equal(got, want) {
			t.Errorf("%s read back from the ring: %d bytes, ok %v, equal %v", obj.Key, n, ok, bytes.Equal(got, want))
		}
		f, ok := c.OpenWholeFile(obj)
		if !ok {
			t.Errorf("%s: no whole-shard file", obj.Key)
			continue
		}
		whole, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(whole, want) {
			t.Errorf("%s's whole-shard file: %d bytes, %v; want the store's %d", obj.Key, len(whole), err, len(want))
		}
	}
	st := c.Stats()
	if st.RingWrites != blocks || st.RingPresummed != blocks || st.ChecksumFailures != 0 {
		t.Errorf("ring: %d blocks written, %d of them summed on arrival, %d checksum failures; want %d, %d, 0",
			st.RingWrites, st.RingPresummed, st.ChecksumFailures, blocks, blocks)
	}
}

// gatedFetcher serves from a Mem and holds each GET until gate is
// closed: the first shown bytes of its range arrive before it holds (and
// are said to, so that reads of them are answered), the rest after. With
// abandon, a GET held gives up when its ctx ends, with ctx's error; without,
// it holds on, as a GET whose bytes all arrived ends, cancelled or not.
type gatedFetcher struct {
	*storetest.Mem
	shown   int64
	abandon bool
	gate    chan struct{}
	held    chan struct{} // closed once a GET holds
	once    sync.Once

	mu            sync.Mutex
	running, peak int // GETs running now, and at the most
}

func newGatedFetcher(m *storetest.Mem, shown int64, abandon bool) *gatedFetcher {
	return &gatedFetcher{Mem: m, shown: shown, abandon: abandon, gate: make(chan struct{}), held: make(chan struct{})}
}

func (f *gatedFetcher) ReadRange(ctx context.Context, obj store.Object, off int64, p []byte) (int, error) {
	f.mu.Lock()
	f.running++
	f.peak = max(f.peak, f.running)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}()
	n, err := f.Mem.ReadRange(store.WithProgress(ctx, nil), obj, off, p)
	shown := min(int(f.shown), n)
	store.ReportProgress(ctx, shown)
	f.once.Do(func() { close(f.held) })
	if f.abandon {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return shown, ctx.Err()
		}
	} else {
		<-f.gate
	}
	store.ReportProgress(ctx, n)
	return n, err
}

// runningNow is how many GETs run now.
func (f *gatedFetcher) runningNow() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running
}

// A shard is made whole only once the GET of its last bytes is over and
// its bytes in the cache, though the reads had those bytes before.
func TestShardIsMadeWholeOnceItsLastGETIsCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, 50)
		m, objs := newStore(t, 3*bs+10)
		f := newGatedFetcher(m, 4*bs, false)
		done := make(chan Result)
		go func() { done <- run(t, context.Background(), PlanCache(c, objs), f, c, testConfig) }()
		<-f.held
		synctest.Wait() // the shard's reads are answered; its GET holds
		close(f.gate)
		if res := <-done; res.Whole != 1 || res.Done != 1 {
			t.Errorf("result %+v, want the shard done and whole", res)
		}
		if again := PlanCache(c, objs); again.Missing != 0 {
			t.Errorf("the ring lacks %d bytes of the shard", again.Missing)
		}
	})
}

// An interrupted warm returns, and the shard it was in the middle of is
// neither done nor failed: the interruption is not the shard's failure.
func TestInterruptedWarmFailsNoShard(t *testing.T) {
	c := newCache(t, 0)
	m, objs := newStore(t, 6*bs)
	f := newGatedFetcher(m, 0, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result)
	go func() { done <- run(t, ctx, PlanCache(c, objs), f, c, testConfig) }()
	<-f.held
	cancel()
	if res := <-done; res.Done != 0 || len(res.Failed) != 0 {
		t.Errorf("interrupted: %d shards done, failed %v; want none of either", res.Done, res.Failed)
	}
}

// Concurrency bounds the GETs running at once, and the warm keeps that
// many running: shards smaller than a part, one GET each, Concurrency of
// them read at once while the others wait.
func TestConcurrencyBoundsTheGETs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, 0)
		m, objs := newStore(t, 2*bs, 2*bs, 2*bs, 2*bs, 2*bs, 2*bs, 2*bs)
		f := newGatedFetcher(m, 0, true)
		done := make(chan Result)
		go func() { done <- run(t, context.Background(), PlanCache(c, objs), f, c, testConfig) }()
		synctest.Wait() // every GET started holds
		running := f.runningNow()
		close(f.gate)
		res := <-done
		if running != testConfig.Concurrency || f.peak != testConfig.Concurrency {
			t.Errorf("%d GETs running while they were held, %d at the most; want %d", running, f.peak, testConfig.Concurrency)
		}
		if res.Done != len(objs) {
			t.Errorf("%d shards done, want %d", res.Done, len(objs))
		}
	})
}

// A shard is fetched in PartSize GETs: its first GET is a whole part, none
// is larger, and together they bring each byte once.
func TestGETsArePartSize(t *testing.T) {
	c := newCache(t, 0)
	m, objs := newStore(t, 41*bs+100)
	gets := recordGets(m)
	run(t, context.Background(), PlanCache(c, objs), m, c, testConfig)
	all := gets()
	slices.SortFunc(all, func(a, b get) int { return int(a.off - b.off) })
	var next int64
	for i, g := range all {
		if i == 0 && g.n != testConfig.PartSize || g.n > testConfig.PartSize || g.off != next {
			t.Fatalf("GETs %+v: want one of a whole part at 0 and none larger, end to end", all)
		}
		next = g.off + g.n
	}
	if next != objs[0].Size {
		t.Errorf("GETs end at %d, the shard at %d", next, objs[0].Size)
	}
}
