//go:build e2e

package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const warmTimeout = 5 * time.Minute

// TestWarmThenStoreStopped: after `shardfs warm`, with the object store
// stopped entirely, a mount from a manifest serves every shard from the
// cache, byte for byte, without a single request to the store.
func TestWarmThenStoreStopped(t *testing.T) {
	t.Parallel()
	h := privateStore(t)
	env := h.env()
	manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
	r := mustRun(t, env, 2*time.Minute, "manifest", h.source(), "--endpoint-url", h.minio.url)
	if err := os.WriteFile(manifest, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := cacheFlags(t.TempDir(), "512MiB")
	mustRun(t, env, warmTimeout, append([]string{"warm", h.source(), "--endpoint-url", h.minio.url}, cache...)...)

	h.minio.stop()
	if resp, err := http.Get(h.minio.url + "/minio/health/live"); err == nil {
		resp.Body.Close()
		t.Fatalf("MinIO at %s still answers after it was stopped", h.minio.url)
	}

	flags := append([]string{"--manifest", manifest, "--retry-timeout", "5s"}, cache...)
	m := mountWith(t, env, h.minio.url, h.source(), flags...)
	checkShards(t, m.dir, e2e.objects)
	st := mountStats(t, m.dir)
	if st["store_gets_total"] != 0 || st["store_lists_total"] != 0 || st["store_errors_total"] != 0 {
		t.Errorf("with the store stopped: %v GETs, %v LISTs, %v errors; want none", st["store_gets_total"], st["store_lists_total"], st["store_errors_total"])
	}
	// Shards held whole are read by the kernel (passthrough), the rest
	// from the ring.
	if st["cache_ring_hits_total"] == 0 && st["passthrough_opens_total"] == 0 {
		t.Errorf("cache_ring_hits_total and passthrough_opens_total are 0: the reads did not come from the warmed cache")
	}
}

// TestCacheSurvivesRemount: what one mount read is served from the cache
// by the next mount of the same cache dir: the shards it read whole by the
// kernel from their whole-shard files (passthrough), the rest from the
// ring.
func TestCacheSurvivesRemount(t *testing.T) {
	t.Parallel()
	// --cache-lag wait: under the default, read-ahead blocks that reach a
	// lagging disk are served and not kept (prefetch.TestReadAheadSkipsASinkThatStalls),
	// and what the remount finds would depend on the disk's pace.
	cache := append(cacheFlags(t.TempDir(), "512MiB"), "--cache-lag", "wait")
	first := mountShardfs(t, e2e.source(), cache...)
	checkShards(t, first.dir, e2e.objects)
	if st := mountStats(t, first.dir); st["store_gets_total"] == 0 {
		t.Fatalf("the first mount of an empty cache sent no GET")
	}
	first.stop(t)

	second := mountShardfs(t, e2e.source(), cache...)
	checkShards(t, second.dir, e2e.objects)
	st := mountStats(t, second.dir)
	if st["store_gets_total"] != 0 {
		t.Errorf("after a clean unmount and remount: %v GETs (%v bytes), want 0", st["store_gets_total"], st["store_bytes_total"])
	}
	if st["cache_ring_hits_total"] == 0 && st["passthrough_opens_total"] == 0 {
		t.Errorf("after a remount: cache_ring_hits_total and passthrough_opens_total are 0: the reads did not come from the cache")
	}
}

// TestWarmOfTheBucketServesAMountOfAPrefix: the cache names objects by
// their keys in the bucket, so `shardfs warm s3://bucket` serves a later
// mount of s3://bucket/prefix without a request to the store.
func TestWarmOfTheBucketServesAMountOfAPrefix(t *testing.T) {
	t.Parallel()
	cache := cacheFlags(t.TempDir(), "512MiB")
	bucket := "s3://" + e2e.bucket
	mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", bucket, "--endpoint-url", e2e.minio.url}, cache...)...)

	m := mountShardfs(t, e2e.source(), cache...)
	checkShards(t, m.dir, e2e.objects)
	st := mountStats(t, m.dir)
	if st["store_gets_total"] != 0 {
		t.Errorf("a mount of %s after a warm of %s sent %v GETs (%v bytes); want 0",
			e2e.source(), bucket, st["store_gets_total"], st["store_bytes_total"])
	}
}

// TestCacheAfterWarmKilled: kill -9 of a warm in the middle leaves a cache
// whose complete blocks still hit and whose bytes all read back correct.
func TestCacheAfterWarmKilled(t *testing.T) {
	t.Parallel()
	large, _ := lookup(e2e.objects, largeKey)
	// 32 MiB/s through the proxy: the 210 MiB shard takes seconds, and the
	// kill comes once a quarter of it has passed.
	proxy := startStoreProxy(t, &storeProxy{bucket: e2e.bucket, rate: 32 << 20, threshold: large.size / 4})
	dir := t.TempDir()
	cache := cacheFlags(dir, "512MiB")
	warm, out, done := startWarm(t, e2e.env(), append([]string{e2e.source(), "--endpoint-url", proxy.url,
		"--include", largeKey, "--concurrency", "2"}, cache...)...)
	select {
	case <-proxy.crossed:
	case <-done:
		t.Fatalf("warm exited (%v) before the kill; output:\n%s", warm.ProcessState, out.String())
	case <-time.After(warmTimeout):
		t.Fatalf("warm fetched only %d bytes in %v", proxy.sentBytes(), warmTimeout)
	}
	if err := warm.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	if ws, ok := warm.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("warm ended by itself (%v) before the kill; output:\n%s", warm.ProcessState, out.String())
	}

	cached := parseSize(t, cacheStat(t, dir, "bytes cached"))
	if cached == 0 || cached >= large.size {
		t.Errorf("after kill -9 mid-warm the cache holds %d bytes; want some but not all of %d", cached, large.size)
	}
	// kill -9 cannot tear a write in the page cache; a slot caught between
	// its data and its header fails its CRC. Either way nothing else.
	r := runShardfs(e2e.env(), time.Minute, "cache", "verify", "--cache-dir", dir)
	if r.err != nil || (r.code != 0 && r.code != 1) {
		t.Fatalf("cache verify after kill -9: exit %d, %v\n%s%s", r.code, r.err, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(line, "bad slot") && !strings.Contains(line, "fails its CRC32C") && !strings.Contains(line, "unreadable slot header") {
			t.Errorf("cache verify after kill -9 reports more than a torn slot: %s", line)
		}
	}

	// No next-shard read-ahead: store_bytes_total must count this shard only.
	m := mountShardfs(t, e2e.source(), append([]string{"--prefetch-next", "0"}, cache...)...)
	checkShards(t, m.dir, []object{large})
	st := mountStats(t, m.dir)
	t.Logf("killed after %d bytes through the proxy; %d bytes cached; verify: %s; the mount then fetched %v of %d bytes in %v GETs, %v ring hits, %v bytes from the ring",
		proxy.sentBytes(), cached, lastLine(r.stdout), st["store_bytes_total"], large.size, st["store_gets_total"], st["cache_ring_hits_total"], st["cache_ring_served_bytes_total"])
	if st["cache_ring_hits_total"] == 0 {
		t.Errorf("blocks the killed warm completed did not hit: cache_ring_hits_total 0")
	}
	if fetched := int64(st["store_bytes_total"]); fetched > large.size-cached {
		t.Errorf("the mount fetched %d bytes of the %d-byte shard; %d were cached and should not be fetched again", fetched, large.size, cached)
	}
}

// parseSize reads a size as shardfs prints it ("12 B", "3.5 MiB").
func parseSize(t *testing.T, s string) int64 {
	t.Helper()
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	shift := strings.Index("BKMGTP", unit[:min(len(unit), 1)])
	if err != nil || unit == "" || shift < 0 {
		t.Fatalf("cannot read %q as a size", s)
	}
	return int64(v * float64(int64(1)<<(10*shift)))
}

// TestCacheCorruptRingRefetched: bytes flipped in the ring file are never
// served: reads refetch them, and cache verify names the bad slots.
func TestCacheCorruptRingRefetched(t *testing.T) {
	t.Parallel()
	shards := e2e.smallShards()[:6]
	dir := t.TempDir()
	// The ring alone: shards held whole would be read from their files.
	cache := append(cacheFlags(dir, "64MiB"), "--whole-shard-percent", "0")
	mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", e2e.source(), "--include", "shard-00000[0-5].tar"}, append(e2e.endpoint(), cache...)...)...)

	// Find three shards' bytes in the ring by content, and flip some.
	ring := filepath.Join(dir, "ring.dat")
	image, err := os.ReadFile(ring)
	if err != nil {
		t.Fatal(err)
	}
	corrupted := shards[1:4]
	for _, o := range corrupted {
		src, err := os.ReadFile(filepath.Join(e2e.data, o.key))
		if err != nil {
			t.Fatal(err)
		}
		at := bytes.Index(image, src[64<<10:68<<10])
		if at < 0 {
			t.Fatalf("%s: its bytes are not in %s after warm", o.key, ring)
		}
		for i := at + 100; i < at+116; i++ {
			image[i] ^= 0xff
		}
	}
	f, err := os.OpenFile(ring, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(image, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := runShardfs(e2e.env(), time.Minute, "cache", "verify", "--cache-dir", dir)
	if r.err != nil || r.code != 1 {
		t.Errorf("cache verify of a ring with flipped bytes: exit %d, %v; want 1\n%s%s", r.code, r.err, r.stdout, r.stderr)
	}
	var bad []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "bad slot ") {
			bad = append(bad, line)
		}
	}
	if len(bad) != len(corrupted) {
		t.Errorf("cache verify names %d bad slots, want %d:\n%s", len(bad), len(corrupted), r.stdout)
	}
	for _, o := range corrupted {
		key := e2e.prefix + "/" + o.key // the cache names an object by its key in the bucket
		if !strings.Contains(r.stdout, strconv.Quote(key)) {
			t.Errorf("cache verify does not name %s:\n%s", key, r.stdout)
		}
	}

	m := mountShardfs(t, e2e.source(), cache...)
	checkShards(t, m.dir, shards)
	st := mountStats(t, m.dir)
	t.Logf("verify:\n%smount: %v checksum failures, %v GETs, %v ring hits", r.stdout, st["cache_checksum_failures_total"], st["store_gets_total"], st["cache_ring_hits_total"])
	if st["cache_checksum_failures_total"] < float64(len(corrupted)) {
		t.Errorf("cache_checksum_failures_total %v, want at least %d", st["cache_checksum_failures_total"], len(corrupted))
	}
	if st["store_gets_total"] < float64(len(corrupted)) {
		t.Errorf("store_gets_total %v: the %d corrupted blocks were not refetched", st["store_gets_total"], len(corrupted))
	}
	if st["cache_ring_hits_total"] == 0 {
		t.Errorf("cache_ring_hits_total 0: the intact shards did not come from the ring")
	}
}

// TestCacheStaysWithinSize: reading three times --cache-size through a
// mount keeps the ring's files within it, evicts the oldest blocks first and
// reads stay correct.
func TestCacheStaysWithinSize(t *testing.T) {
	t.Parallel()
	const (
		bucket    = "shardfs-evict"
		objects   = 10
		objSize   = 10 << 20
		cacheSize = 32 << 20
	)
	content := map[string][]byte{}
	var objs []object
	for i := range objects {
		key := fmt.Sprintf("obj-%02d.bin", i)
		data := pattern(uint64(100+i), objSize)
		sum := sha256.Sum256(data)
		content[key] = data
		objs = append(objs, object{key: key, size: objSize, sha256: hex.EncodeToString(sum[:])})
	}
	newBucket(t, bucket, content)
	dir := t.TempDir()
	// The ring alone: the mount makes no whole-shard files. Every block
	// read goes to it, however the disk keeps pace (--cache-lag wait), and
	// no other block does (no next-shard read-ahead), so that the count of
	// ring writes says which objects are in the ring.
	cache := append(cacheFlags(dir, "32MiB"), "--whole-shard-percent", "0", "--cache-lag", "wait", "--prefetch-next", "0")

	m := mountShardfs(t, "s3://"+bucket, cache...)
	var most, mostAllocated int64
	for i, o := range objs {
		f, err := os.Open(m.path(o.key))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		buf := make([]byte, 1<<20)
		for {
			n, err := f.Read(buf)
			h.Write(buf[:n])
			size, allocated := dirBytes(t, dir)
			most, mostAllocated = max(most, size), max(mostAllocated, allocated)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read %s: %v", o.key, err)
			}
		}
		f.Close()
		if got := hex.EncodeToString(h.Sum(nil)); got != o.sha256 {
			t.Errorf("%s: sha256 %s, want %s", o.key, got, o.sha256)
		}
		// The ring takes a block after the read that wanted it has been
		// answered, and drops one it finds no free slot for while all its
		// slots are being written: a reader faster than the disk could
		// leave blocks of the last objects out of the ring, and the
		// remount below would fetch them again. Waiting for the objects
		// read so far to reach the ring keeps the blocks being written far
		// below the ring's slots, and the last object whole in the ring
		// before the unmount.
		waitStat(t, m.dir, "cache_ring_writes_total", float64((i+1)*objSize>>20))
	}
	st := mountStats(t, m.dir)
	if st["cache_evictions_total"] == 0 {
		t.Errorf("%d MiB read through a %d MiB cache evicted nothing", objects*objSize>>20, cacheSize>>20)
	}
	skipped, written := st["prefetch_cache_skipped_bytes_total"], st["cache_ring_writes_total"]
	m.stop(t)
	size, allocated := dirBytes(t, dir)
	most, mostAllocated = max(most, size), max(mostAllocated, allocated)
	t.Logf("cache dir peaked at %d bytes (%d allocated) for --cache-size %d", most, mostAllocated, cacheSize)
	if most > cacheSize || mostAllocated > cacheSize {
		t.Errorf("cache dir grew to %d bytes (%d allocated), over --cache-size %d", most, mostAllocated, cacheSize)
	}
	if most < cacheSize*3/4 {
		t.Errorf("cache dir peaked at %d bytes: the ring did not use --cache-size %d", most, cacheSize)
	}

	// A fresh mount (empty page cache): the newest object is all in the
	// ring, the oldest was evicted.
	m = mountShardfs(t, "s3://"+bucket, cache...)
	newest, oldest := objs[len(objs)-1], objs[0]
	checkShards(t, m.dir, []object{newest})
	if st := mountStats(t, m.dir); st["store_gets_total"] != 0 || st["cache_ring_hits_total"] == 0 {
		t.Errorf("re-reading the newest object %s: %v GETs, %v ring hits; want 0 GETs, all hits (the first mount skipped %v bytes, and wrote %v blocks to the ring)", newest.key, st["store_gets_total"], st["cache_ring_hits_total"], skipped, written)
	}
	checkShards(t, m.dir, []object{oldest})
	if st := mountStats(t, m.dir); st["store_gets_total"] == 0 {
		t.Errorf("re-reading the oldest object %s sent no GET: it was not evicted first", oldest.key)
	}
}

// TestWarmRanksSplitShards: ranks 0..2 of --world 3 together warm every
// shard exactly once, each its shards[rank::3] in listing order.
func TestWarmRanksSplitShards(t *testing.T) {
	t.Parallel()
	const world = 3
	var nonEmpty []object
	for _, o := range e2e.objects {
		if o.size > 0 {
			nonEmpty = append(nonEmpty, o)
		}
	}
	warmedBy := map[string][]int{}
	for rank := range world {
		proxy := startStoreProxy(t, &storeProxy{bucket: e2e.bucket})
		dir := t.TempDir()
		mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", e2e.source(), "--endpoint-url", proxy.url,
			"--rank", strconv.Itoa(rank), "--world", strconv.Itoa(world)}, cacheFlags(dir, "512MiB")...)...)
		var want, got []string
		for i := rank; i < len(e2e.objects); i += world {
			if e2e.objects[i].size > 0 {
				want = append(want, e2e.objects[i].key)
			}
		}
		for _, key := range proxy.readKeys() {
			key = strings.TrimPrefix(key, e2e.prefix+"/")
			got = append(got, key)
			warmedBy[key] = append(warmedBy[key], rank)
		}
		if !slices.Equal(got, want) {
			t.Errorf("rank %d of %d read %q, want shards[%d::%d] = %q", rank, world, got, rank, world, want)
		}
		if v := cacheStat(t, dir, "object versions"); v != strconv.Itoa(len(want)) {
			t.Errorf("rank %d: cache stats shows %s object versions, want %d", rank, v, len(want))
		}
	}
	for _, o := range nonEmpty {
		if ranks := warmedBy[o.key]; len(ranks) != 1 {
			t.Errorf("%s warmed by ranks %v, want exactly one", o.key, ranks)
		}
	}
	if len(warmedBy) != len(nonEmpty) {
		t.Errorf("ranks warmed %d distinct objects, the data set has %d non-empty ones", len(warmedBy), len(nonEmpty))
	}
}

// TestWarmFailedShardExitsNonZero: shards that vanish or change after the
// listing make warm exit 1 with a summary naming them; the rest are cached,
// and a second warm fetches only what is missing.
func TestWarmFailedShardExitsNonZero(t *testing.T) {
	t.Parallel()
	const bucket = "shardfs-warm-fail"
	content := map[string][]byte{}
	for i, key := range []string{"a.bin", "b.bin", "c.bin", "d.bin"} {
		content[key] = pattern(uint64(200+i), 3<<20+1234)
	}
	newBucket(t, bucket, content)
	proxy := &storeProxy{bucket: bucket}
	var once sync.Once
	proxy.afterList = func() { once.Do(func() { replaceAfterListing(t, bucket) }) }
	startStoreProxy(t, proxy)
	dir := t.TempDir()
	cache := cacheFlags(dir, "64MiB")
	args := append([]string{"warm", "s3://" + bucket, "--retry-timeout", "5s", "--endpoint-url", proxy.url}, cache...)
	r := runShardfs(e2e.env(), warmTimeout, args...)
	if r.err != nil || r.code != 1 {
		t.Fatalf("warm with a deleted and a replaced shard: exit %d, %v; want 1\nstdout: %s\nstderr: %s", r.code, r.err, r.stdout, r.stderr)
	}
	all := r.stdout + r.stderr
	t.Logf("warm output:\n%s", all)
	for _, want := range []string{`failed: b\.bin`, `failed: c\.bin`, `2 of 4 shards failed`} {
		if !regexp.MustCompile(want).MatchString(all) {
			t.Errorf("warm summary does not match %q:\n%s", want, all)
		}
	}
	if v := cacheStat(t, dir, "object versions"); v != "2" {
		t.Errorf("after the failed warm the cache holds %s object versions, want 2 (a.bin, d.bin)", v)
	}

	if err := e2e.putObject(bucket, "b.bin", content["b.bin"]); err != nil {
		t.Fatal(err)
	}
	again := startStoreProxy(t, &storeProxy{bucket: bucket})
	args = append([]string{"warm", "s3://" + bucket, "--endpoint-url", again.url}, cache...)
	mustRun(t, e2e.env(), warmTimeout, args...)
	if got := again.readKeys(); !slices.Equal(got, []string{"b.bin", "c.bin"}) {
		t.Errorf("the second warm read %q, want only the shards the first one missed [b.bin c.bin]", got)
	}
}

// replaceAfterListing deletes b.bin and replaces c.bin, as a data set
// rewrite between a warm's listing and its GETs would.
func replaceAfterListing(t *testing.T, bucket string) {
	if err := e2e.rclone("deletefile", ":s3:"+bucket+"/b.bin"); err != nil {
		t.Error(err)
	}
	if err := e2e.putObject(bucket, "c.bin", pattern(299, 3<<20)); err != nil {
		t.Error(err)
	}
}
