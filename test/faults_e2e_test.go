//go:build e2e

package test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The fault tests run the mount with short bounds so that a read that
// cannot succeed fails quickly. One read(2) may take at most the retry
// budget, plus the attempt that was running when the budget ran out (a
// stall), plus one backoff; faultMargin absorbs scheduling on a busy box.
const (
	faultRetryTimeout = 20 * time.Second
	faultStallTimeout = 2 * time.Second
	faultMaxBackoff   = 5 * time.Second
	faultReadBound    = faultRetryTimeout + faultStallTimeout + faultMaxBackoff
	faultMargin       = 15 * time.Second
	faultParallel     = 4       // objects read at once
	faultChunk        = 1 << 20 // bytes per read(2)
)

// faultMountFlags keep the RAM tier off, so that a read after the fault
// reaches the store again, and keep read-ahead modest.
func faultMountFlags() []string {
	return []string{
		"--retry-timeout", faultRetryTimeout.String(), "--stall-timeout", faultStallTimeout.String(),
		"--memory-cache-size", "0", "--max-prefetch", "32MiB", "--prefetch-memory", "128MiB",
	}
}

// readOutcome is how one full read of one object through the mount ended.
type readOutcome struct {
	obj      object
	good     int64         // leading bytes read and found equal to the source
	err      error         // nil when every byte matched and the size is right
	failedIn time.Duration // how long the failing read(2) took
}

// acceptable says whether the outcome is one the mount may give under a
// fault: the whole file, or EIO within the bound. Never a wrong byte, never
// another errno, never a read(2) past the bound.
func (o readOutcome) acceptable() error {
	switch {
	case o.err == nil:
		return nil
	case errors.Is(o.err, errWrongBytes):
		return o.err
	case !errors.Is(o.err, syscall.EIO):
		return fmt.Errorf("%s: failed after %d good bytes with %v, want EIO", o.obj.key, o.good, o.err)
	case o.failedIn > faultReadBound+faultMargin:
		return fmt.Errorf("%s: EIO came after %v, want within %v (+%v margin)", o.obj.key, o.failedIn, faultReadBound, faultMargin)
	}
	return nil
}

var errWrongBytes = errors.New("wrong bytes")

// checkedReader reads one object through the mount in faultChunk reads and
// compares every chunk with the local copy of the data set. started holds
// the start of the read(2) in progress (UnixNano), 0 between reads, for the
// watchdog.
type checkedReader struct {
	started atomic.Int64
}

func (r *checkedReader) read(m *fgMount, o object, fr *faultRun) readOutcome {
	out := readOutcome{obj: o}
	f, err := os.Open(m.path(o.key))
	if err != nil {
		out.err = err
		return out
	}
	defer f.Close()
	want, err := os.Open(filepath.Join(e2e.data, filepath.FromSlash(o.key)))
	if err != nil {
		out.err = err
		return out
	}
	defer want.Close()
	got, ref := make([]byte, faultChunk), make([]byte, faultChunk)
	gate := fr.gate
	for {
		start := time.Now()
		r.started.Store(start.UnixNano())
		n, err := f.Read(got)
		took := time.Since(start)
		r.started.Store(0)
		if n > 0 {
			fr.firstBytes.CompareAndSwap(0, time.Now().UnixNano())
			m, _ := io.ReadFull(want, ref[:n])
			if m != n || !bytes.Equal(got[:n], ref[:n]) {
				out.err = fmt.Errorf("%s: %w in the %d bytes at offset %d (first difference at +%d)",
					o.key, errWrongBytes, n, out.good, firstDiff(got[:n], ref[:m]))
				return out
			}
			out.good += int64(n)
		}
		switch {
		case err == io.EOF && out.good == o.size:
			return out
		case err == io.EOF:
			out.err = fmt.Errorf("%s: %w: end of file after %d bytes, want %d", o.key, errWrongBytes, out.good, o.size)
			return out
		case err != nil:
			out.err, out.failedIn = err, took
			return out
		}
		if gate != nil && out.good > 0 {
			fr.firstOnce.Do(func() { close(fr.firstChunk) })
			<-gate
			gate = nil
		}
	}
}

// faultRun reads objects, faultParallel at a time, while a fault is on.
type faultRun struct {
	m    *fgMount
	objs []object
	// gate, when set, holds every reader after its first chunk until
	// closed; firstChunk is then closed once any reader has got there.
	gate       chan struct{}
	firstChunk chan struct{}
	firstOnce  sync.Once
	// tick, when set, is called about every 250 ms with the time since the
	// first bytes reached a reader (0 before): it turns timed faults on and
	// off. Counted from there, not from the readers' start, a fault set a
	// second in meets GETs whose bodies are arriving however long the mount
	// takes to send its first ones.
	tick func(sinceFirstBytes time.Duration)
	// firstBytes is when the first bytes reached a reader (UnixNano), 0
	// before.
	firstBytes atomic.Int64
}

// run reads every object once and fails the test for any outcome that is
// not acceptable. A read(2) that runs past the bound is reported as a hang
// (the watchdog polls: a blocked read(2) offers nothing to wait on), then
// release lifts the fault so the run can end.
func (fr *faultRun) run(t *testing.T, release func()) []readOutcome {
	t.Helper()
	readers := make([]checkedReader, faultParallel)
	outcomes := make([]readOutcome, len(fr.objs))
	next := make(chan int)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				outcomes[i] = readers[w].read(fr.m, fr.objs[i], fr)
			}
		}()
	}
	go func() {
		for i := range fr.objs {
			next <- i
		}
		close(next)
		wg.Wait()
		close(done)
	}()
	watchdog := time.NewTicker(250 * time.Millisecond)
	defer watchdog.Stop()
	hung := false
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-watchdog.C:
			if fr.tick != nil && !hung {
				var since time.Duration
				if at := fr.firstBytes.Load(); at != 0 {
					since = time.Since(time.Unix(0, at))
				}
				fr.tick(since)
			}
			for w := range readers {
				if s := readers[w].started.Load(); s != 0 && !hung && time.Since(time.Unix(0, s)) > faultReadBound+faultMargin {
					hung = true
					t.Errorf("a read(2) through the mount has been blocked for more than %v (retry timeout %v, stall timeout %v): hang",
						faultReadBound+faultMargin, faultRetryTimeout, faultStallTimeout)
					release()
				}
			}
		}
	}
	for _, o := range outcomes {
		if err := o.acceptable(); err != nil {
			t.Error(err)
		}
	}
	return outcomes
}

// checkStillServing asserts that the daemon survived the fault: the process
// runs, the mount is in the mount table, store_retries_total shows the
// retries, and a later read works: the objects that failed read whole now,
// and so does the last object with its pages dropped from the page cache.
func checkStillServing(t *testing.T, m *fgMount, outcomes []readOutcome, wantRetries bool) {
	t.Helper()
	select {
	case <-m.exited:
		t.Fatalf("shardfs exited during the fault: %v\noutput:\n%s", m.err, m.output.String())
	default:
	}
	if !isMounted(m.dir) {
		t.Fatalf("%s is no longer mounted after the fault", m.dir)
	}
	var again []object
	failed := 0
	for _, o := range outcomes {
		if o.err != nil {
			again = append(again, o.obj)
			failed++
		}
	}
	last := outcomes[len(outcomes)-1].obj
	dropPageCache(t, m.path(last.key))
	again = append(again, last)
	checkShards(t, m.dir, again)
	retries := mountStats(t, m.dir)["store_retries_total"]
	t.Logf("%d of %d objects failed with EIO during the fault; store_retries_total %v", failed, len(outcomes), retries)
	if wantRetries && retries <= 0 {
		t.Errorf("store_retries_total is %v after the fault, want > 0; the mount's log ends:\n%s",
			retries, lastLines(m.output.String(), 30))
	}
}

// dropPageCache drops the kernel's cached pages of path, so that the next
// read goes to the daemon.
func dropPageCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise DONTNEED %s: %v", path, err)
	}
}

// TestFaultToxics reads the whole data set through Toxiproxy in front of
// MinIO while one toxic at a time is on.
func TestFaultToxics(t *testing.T) {
	t.Parallel()
	tp := startToxiproxy(t)
	// The reset and timeout toxics start soon after the first bytes reach
	// the readers, while the large shard's GETs are mid-body (its 210 MiB,
	// through a read-ahead of at most --max-prefetch at 20 MB/s per GET,
	// take seconds), and end a few seconds later. Each is on every
	// connection (toxicity 1), and a case fails if one never went on: it
	// cannot pass without the fault reaching a read.
	cases := []struct {
		name        string
		toxics      []timedToxic
		wantRetries bool
	}{
		// Delays of up to 2.5 s on a third of the connections: a few gaps
		// pass --stall-timeout and are retried, the rest are only slow. It
		// stays on through the checks after the read: removing a latency
		// toxic under traffic can hang Toxiproxy (Shopify/toxiproxy#558).
		{"latency-spikes", []timedToxic{{toxic: toxic{Type: "latency", Toxicity: 0.3,
			Attributes: map[string]any{"latency": 1000, "jitter": 1500}}, stays: true}}, false},
		// At 20 MB/s per connection every 8 MiB part takes longer than
		// 400 ms, so part GETs are mid-body when every connection, open or
		// new, is reset for two seconds.
		{"reset-peer", []timedToxic{
			{toxic: toxic{Type: "bandwidth", Toxicity: 1, Attributes: map[string]any{"rate": 20_000}}},
			{toxic: toxic{Type: "reset_peer", Toxicity: 1, Attributes: map[string]any{"timeout": 0}},
				from: 500 * time.Millisecond, until: 2500 * time.Millisecond},
		}, true},
		// Every connection is closed after 2 MB: every part GET of the
		// large shard is cut mid-body.
		{"limit-data", []timedToxic{{toxic: toxic{Type: "limit_data", Toxicity: 1,
			Attributes: map[string]any{"bytes": 2_000_000}}}}, true},
		// Every connection, open or new, goes silent for more than twice
		// --stall-timeout; what the store sends meanwhile is lost.
		{"timeout", []timedToxic{
			{toxic: toxic{Type: "bandwidth", Toxicity: 1, Attributes: map[string]any{"rate": 20_000}}},
			{toxic: toxic{Type: "timeout", Toxicity: 1, Attributes: map[string]any{"timeout": 0}},
				from: time.Second, until: time.Second + 2*faultStallTimeout + time.Second},
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := tp.proxy(t, "minio-"+c.name, e2e.minio.url)
			m := mountWith(t, e2e.env(), p.url, e2e.source(), faultMountFlags()...)
			sched := toxicSchedule{proxy: p, toxics: c.toxics, prefix: c.name}
			sched.tick(t, 0)
			start := time.Now()
			fr := &faultRun{m: m, objs: e2e.objects, tick: func(elapsed time.Duration) { sched.tick(t, elapsed) }}
			outcomes := fr.run(t, func() { sched.release(t) })
			t.Logf("full read under %s took %v", c.name, time.Since(start).Round(time.Millisecond))
			sched.release(t)
			sched.checkApplied(t)
			checkStillServing(t, m, outcomes, c.wantRetries)
		})
	}
}

// timedToxic is a toxic that is on from `from` after the first bytes reach
// the readers until `until` after them (0: to the end of the read), or for
// good when it stays.
type timedToxic struct {
	toxic
	from, until time.Duration
	stays       bool
}

// toxicSchedule adds and removes a case's toxics as the read goes on; once
// released, it adds none again.
type toxicSchedule struct {
	proxy    *toxicProxy
	toxics   []timedToxic
	prefix   string
	on, done map[int]bool
	released bool
}

func (s *toxicSchedule) tick(t *testing.T, elapsed time.Duration) {
	t.Helper()
	if s.on == nil {
		s.on, s.done = map[int]bool{}, map[int]bool{}
	}
	for i, tx := range s.toxics {
		ended := tx.until > 0 && elapsed >= tx.until
		switch {
		case s.on[i] && ended:
			s.proxy.remove(t, s.name(i))
			s.on[i], s.done[i] = false, true
		case !s.on[i] && !s.done[i] && !ended && elapsed >= tx.from && !s.released:
			tx.toxic.Name = s.name(i)
			s.proxy.add(t, tx.toxic)
			s.on[i] = true
		}
	}
}

// release removes every toxic still on, except those that stay.
func (s *toxicSchedule) release(t *testing.T) {
	t.Helper()
	s.released = true
	for i, on := range s.on {
		if on && !s.toxics[i].stays {
			s.proxy.remove(t, s.name(i))
			s.on[i], s.done[i] = false, true
		}
	}
}

func (s *toxicSchedule) name(i int) string { return fmt.Sprintf("%s-%d", s.prefix, i) }

// checkApplied fails the test for a toxic that never went on: the read
// ended before its time came, and the case checked nothing of it.
func (s *toxicSchedule) checkApplied(t *testing.T) {
	t.Helper()
	for i, tx := range s.toxics {
		if !s.on[i] && !s.done[i] {
			t.Errorf("the %s toxic (%s) never went on: the read ended before %v after its first bytes, when it was due", tx.Type, s.name(i), tx.from)
		}
	}
}

// TestFaultStoreRestart stops a MinIO of its own while readers are in the
// middle of the data set and starts it again on the same port and data.
func TestFaultStoreRestart(t *testing.T) {
	t.Parallel()
	const outage = 5 * time.Second // well within --retry-timeout: reads should survive it
	h := privateStore(t)
	m := mountWith(t, e2e.env(), h.minio.url, h.source(), faultMountFlags()...)
	fr := &faultRun{m: m, objs: h.objects, gate: make(chan struct{}), firstChunk: make(chan struct{})}
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		<-fr.firstChunk
		h.minio.stop()
		close(fr.gate)
		<-time.After(outage) // the outage itself, not synchronization
	}()
	restarted := make(chan *minioServer, 1)
	go func() {
		<-resumed
		restarted <- restartMinio(t, h.minio)
	}()
	outcomes := fr.run(t, func() {})
	if m2 := <-restarted; m2 == nil {
		t.Fatal("MinIO did not come back")
	}
	checkStillServing(t, m, outcomes, true)
}

// restartMinio starts old's command again (same port, same data) after it
// has been stopped; nil when it does not come up. Stopped when the test ends.
func restartMinio(t *testing.T, old *minioServer) *minioServer {
	cmd := exec.Command(old.cmd.Path, old.cmd.Args[1:]...)
	cmd.Env = old.cmd.Env
	logFile, err := os.OpenFile(old.log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Errorf("restart minio: %v", err)
		return nil
	}
	m := &minioServer{url: old.url, cmd: cmd, exited: make(chan struct{}), log: old.log}
	go func() {
		cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(m.stop)
	if err := m.waitReady(60 * time.Second); err != nil {
		t.Errorf("restarted minio: %v", err)
		return nil
	}
	return m
}

// slowDownProxy forwards to the shared MinIO but answers every nth object
// GET itself with 503 SlowDown, as S3 does when a prefix is throttled.
type slowDownProxy struct {
	url     string
	every   int64
	gets    atomic.Int64
	refused atomic.Int64
}

const slowDownBody = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>SHARDFSTEST</RequestId></Error>`

func startSlowDownProxy(t *testing.T, every int64) *slowDownProxy {
	t.Helper()
	target, err := url.Parse(e2e.minio.url)
	if err != nil {
		t.Fatal(err)
	}
	p := &slowDownProxy{every: every}
	forward := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the client signed this Host
	}, ErrorLog: log.New(io.Discard, "", 0)} // cancelled GETs are expected here
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isObjectGet := r.Method == http.MethodGet && r.Header.Get("Range") != ""
		if isObjectGet && p.gets.Add(1)%p.every == 0 {
			p.refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, slowDownBody)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// TestSlowDown: with every third ranged GET refused with 503 SlowDown,
// every object still reads whole and correct, and the retries show in the
// mount's statistics.
func TestSlowDown(t *testing.T) {
	t.Parallel()
	p := startSlowDownProxy(t, 3)
	m := mountWith(t, e2e.env(), p.url, e2e.source(), faultMountFlags()...)
	var objs []object
	for _, o := range e2e.objects {
		if o.size > 0 {
			objs = append(objs, o)
		}
	}
	outcomes := (&faultRun{m: m, objs: objs}).run(t, func() {})
	for _, o := range outcomes {
		if o.err != nil {
			t.Errorf("%s: %v (a throttled store must slow reads down, not fail them)", o.obj.key, o.err)
		}
	}
	stats := mountStats(t, m.dir)
	t.Logf("%d ranged GETs, %d answered 503 SlowDown; store_retries_total %v, read_network_wait_seconds_total %v",
		p.gets.Load(), p.refused.Load(), stats["store_retries_total"], stats["read_network_wait_seconds_total"])
	if p.refused.Load() == 0 {
		t.Fatalf("the proxy refused no GET (%d seen): the test did not throttle anything", p.gets.Load())
	}
	if stats["store_retries_total"] <= 0 {
		t.Errorf("store_retries_total is %v after %d SlowDown answers, want > 0", stats["store_retries_total"], p.refused.Load())
	}
	if !strings.Contains(m.output.String(), "SlowDown") && !strings.Contains(m.output.String(), "503") {
		t.Errorf("the mount's log never names the SlowDown cause; log:\n%s", lastLines(m.output.String(), 20))
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestEndpointDiesEIOWithinRetryTimeout: the store's endpoint goes away
// (the proxy in front of it refuses connections) while a file is open and
// unread. The first read(2) fails with EIO within --retry-timeout and 2 s:
// the kernel reads the failed page again itself, and that read must not
// wait out a second retry budget. Once the endpoint is back, the file
// reads whole, every byte right.
func TestEndpointDiesEIOWithinRetryTimeout(t *testing.T) {
	t.Parallel()
	const retry = 6 * time.Second
	tp := startToxiproxy(t)
	p := tp.proxy(t, "minio-dies", e2e.minio.url)
	m := mountWith(t, e2e.env(), p.url, e2e.source(),
		"--retry-timeout", retry.String(), "--stall-timeout", faultStallTimeout.String(), "--memory-cache-size", "0")
	o := e2e.objects[0]
	f, err := os.Open(m.path(o.key))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	tp.mustCall(t, http.MethodPost, "/proxies/"+p.name, map[string]any{"enabled": false}, nil)
	start := time.Now()
	_, err = f.Read(make([]byte, faultChunk))
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with the endpoint gone: %v, want EIO", err)
	}
	if took > retry+2*time.Second {
		t.Fatalf("EIO after %v, want within --retry-timeout %v + 2s", took.Round(time.Millisecond), retry)
	}
	t.Logf("EIO after %v (--retry-timeout %v)", took.Round(time.Millisecond), retry)

	tp.mustCall(t, http.MethodPost, "/proxies/"+p.name, map[string]any{"enabled": true}, nil)
	// The range that failed is failed again at once for a moment (the
	// kernel's own re-read); wait for the first read that reaches the
	// store, then check every byte.
	deadline := time.Now().Add(retry + time.Minute)
	for {
		sum, n, err := readSHA256(m.path(o.key), faultChunk)
		if err == nil {
			if sum != o.sha256 || n != o.size {
				t.Fatalf("%s after the endpoint came back: %d bytes, sha256 %s; want %d, %s", o.key, n, sum, o.size, o.sha256)
			}
			break
		}
		if !errors.Is(err, syscall.EIO) || time.Now().After(deadline) {
			t.Fatalf("%s after the endpoint came back: %v", o.key, err)
		}
	}
}
