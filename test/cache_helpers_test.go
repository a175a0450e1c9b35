//go:build e2e

package test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// statSample is one series of MNT/.shardfs/stats; Count is set for
// histograms.
type statSample struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Count int64   `json:"count"`
}

// statSamples reads MNT/.shardfs/stats.
func statSamples(t *testing.T, mnt string) []statSample {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(mnt, ".shardfs", "stats"))
	if err != nil {
		t.Fatalf("read the stats of %s: %v", mnt, err)
	}
	var samples []statSample
	if err := json.Unmarshal(raw, &samples); err != nil {
		t.Fatalf("%s/.shardfs/stats is not JSON: %v", mnt, err)
	}
	return samples
}

// mountStats reads MNT/.shardfs/stats and returns each series by name
// (without the shardfs_ prefix), summed over its labels.
func mountStats(t *testing.T, mnt string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range statSamples(t, mnt) {
		out[strings.TrimPrefix(s.Name, "shardfs_")] += s.Value
	}
	return out
}

// checkShards reads every object through the mount and compares size and
// sha256 with the source.
func checkShards(t *testing.T, mnt string, objs []object) {
	t.Helper()
	for _, o := range objs {
		sum, n, err := fileSHA256(filepath.Join(mnt, filepath.FromSlash(o.key)))
		if err != nil || n != o.size || sum != o.sha256 {
			t.Errorf("%s through the mount: %d bytes, sha256 %s, err %v; want %d bytes %s", o.key, n, sum, err, o.size, o.sha256)
		}
	}
}

// cacheFlags are the cache flags warm and mount share: a ring of another
// size or block size asked for explicitly is refused.
func cacheFlags(dir, size string) []string {
	return []string{"--cache-dir", dir, "--cache-size", size, "--block-size", "1MiB"}
}

// mountWith mounts an s3:// source of the given endpoint in a subprocess;
// extra flags go before the positionals.
func mountWith(t *testing.T, env []string, endpoint, source string, flags ...string) *fgMount {
	t.Helper()
	dir := t.TempDir()
	argv := append([]string{"mount", "--foreground", "--endpoint-url", endpoint}, flags...)
	return startMount(t, dir, append(argv, source, dir), env)
}

// mustRun runs one shardfs command and fails the test unless it exits 0.
func mustRun(t *testing.T, env []string, timeout time.Duration, args ...string) result {
	t.Helper()
	r := runShardfs(env, timeout, args...)
	if r.err != nil || r.code != 0 {
		t.Fatalf("shardfs %s: exit %d, %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.err, r.stdout, r.stderr)
	}
	return r
}

// cacheStat is one field of `shardfs cache stats`, as printed.
func cacheStat(t *testing.T, dir, field string) string {
	t.Helper()
	r := mustRun(t, e2e.env(), time.Minute, "cache", "stats", "--cache-dir", dir)
	for _, line := range strings.Split(r.stdout, "\n") {
		if name, value, ok := strings.Cut(line, "  "); ok && name == field {
			return strings.TrimSpace(value)
		}
	}
	t.Fatalf("shardfs cache stats --cache-dir %s has no %q line:\n%s", dir, field, r.stdout)
	return ""
}

// dirBytes is what the regular files directly in dir take: the sum of
// their sizes and of their allocated blocks.
func dirBytes(t *testing.T, dir string) (apparent, allocated int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, e.Name()), &st); err != nil {
			continue // a file removed since the listing
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			apparent += st.Size
			allocated += st.Blocks * 512
		}
	}
	return apparent, allocated
}

// privateStore starts a MinIO of the test's own (which the test may stop)
// and uploads the data set into it. The returned harness talks to it.
func privateStore(t *testing.T) *harness {
	t.Helper()
	m, err := startMinio(filepath.Join(e2e.root, ".tools", "bin", "minio"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.stop)
	h := *e2e
	h.minio = m
	if err := h.uploadDataset(); err != nil {
		t.Fatal(err)
	}
	return &h
}

// newBucket creates bucket in the shared MinIO holding the given objects
// and nothing else.
func newBucket(t *testing.T, bucket string, content map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	for key, data := range content {
		path := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := e2e.rclone("mkdir", ":s3:"+bucket); err != nil {
		t.Fatal(err)
	}
	// sync, not copy: objects an earlier run of the test left in the
	// bucket go (go test -count runs a test again against the same MinIO).
	if err := e2e.rclone("sync", "--transfers", "4", dir, ":s3:"+bucket); err != nil {
		t.Fatal(err)
	}
}

// storeProxy stands between shardfs and the shared MinIO. It forwards
// requests unchanged (the Host header too, so request signatures hold),
// records which objects were read, can cap the bandwidth of response
// bodies, and closes crossed once threshold body bytes have passed.
type storeProxy struct {
	url    string
	bucket string

	rate      int64  // body bytes per second across all responses; 0 = no cap
	afterList func() // runs when a LIST answer arrives, before the client sees it

	threshold int64
	crossed   chan struct{}
	crossOnce sync.Once

	mu    sync.Mutex
	reads map[string]int // object key in the bucket -> GETs answered
	sent  int64          // body bytes passed on
	paced time.Time      // when the bytes sent so far may have left at rate
}

// startStoreProxy starts p (fields set by the caller) in front of the
// shared MinIO; it is stopped when the test ends.
func startStoreProxy(t *testing.T, p *storeProxy) *storeProxy {
	t.Helper()
	target, err := url.Parse(e2e.minio.url)
	if err != nil {
		t.Fatal(err)
	}
	p.reads = map[string]int{}
	p.crossed = make(chan struct{})
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		ModifyResponse: p.modify,
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *storeProxy) modify(resp *http.Response) error {
	req := resp.Request
	if req.Method == http.MethodGet {
		switch key, isObject := strings.CutPrefix(req.URL.Path, "/"+p.bucket+"/"); {
		case req.URL.Query().Has("list-type"):
			if p.afterList != nil {
				p.afterList()
			}
		case isObject && key != "" && resp.StatusCode/100 == 2:
			p.mu.Lock()
			p.reads[key]++
			p.mu.Unlock()
		}
	}
	resp.Body = &pacedBody{ReadCloser: resp.Body, p: p}
	return nil
}

// readKeys returns the keys of the objects read so far, sorted.
func (p *storeProxy) readKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.reads))
	for k := range p.reads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (p *storeProxy) sentBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// pass accounts n body bytes and holds them back as long as rate demands.
func (p *storeProxy) pass(n int) {
	p.mu.Lock()
	p.sent += int64(n)
	sent := p.sent
	var wait time.Duration
	if p.rate > 0 {
		now := time.Now()
		if p.paced.Before(now) {
			p.paced = now
		}
		p.paced = p.paced.Add(time.Duration(int64(n) * int64(time.Second) / p.rate))
		wait = p.paced.Sub(now)
	}
	p.mu.Unlock()
	if p.threshold > 0 && sent >= p.threshold {
		p.crossOnce.Do(func() { close(p.crossed) })
	}
	time.Sleep(wait) // bandwidth shaping, not synchronization
}

// pacedBody passes a response body on at the proxy's rate.
type pacedBody struct {
	io.ReadCloser
	p *storeProxy
}

func (b *pacedBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if n > 0 {
		b.p.pass(n)
	}
	return n, err
}

// startWarm runs `shardfs warm` in the background; done is closed once it
// has exited and been reaped.
func startWarm(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, out *lockedBuffer, done chan struct{}) {
	t.Helper()
	cmd = exec.Command(e2e.bin, append([]string{"warm"}, args...)...)
	cmd.Env = env
	out = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, out, done
}
