//go:build e2e

package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// toxiproxy is one Toxiproxy server on a free 127.0.0.1 port, driven
// through its HTTP API. It is stopped when the test that started it ends.
type toxiproxy struct {
	api    string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// toxic is one Toxiproxy toxic as its API takes it.
type toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`   // latency, bandwidth, reset_peer, timeout, limit_data, ...
	Stream     string         `json:"stream"` // downstream (store to client) or upstream
	Toxicity   float64        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// toxicProxy is one proxy of a toxiproxy server.
type toxicProxy struct {
	tp   *toxiproxy
	name string
	url  string // http://LISTEN, what clients use as the S3 endpoint
}

func startToxiproxy(t *testing.T) *toxiproxy {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	tp := &toxiproxy{api: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{}),
		log: filepath.Join(t.TempDir(), "toxiproxy.log")}
	logFile, err := os.Create(tp.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	tp.cmd = exec.Command(filepath.Join(e2e.root, ".tools", "bin", "toxiproxy-server"),
		"-host", "127.0.0.1", "-port", strconv.Itoa(port))
	tp.cmd.Stdout, tp.cmd.Stderr = logFile, logFile
	if err := tp.cmd.Start(); err != nil {
		t.Fatalf("start toxiproxy-server (run scripts/install-deps.sh): %v", err)
	}
	go func() {
		tp.cmd.Wait()
		close(tp.exited)
	}()
	t.Cleanup(func() {
		tp.cmd.Process.Kill()
		<-tp.exited
	})
	if err := tp.waitReady(30 * time.Second); err != nil {
		raw, _ := os.ReadFile(tp.log)
		t.Fatalf("%v\ntoxiproxy log:\n%s", err, raw)
	}
	return tp
}

// waitReady polls the API: a server coming up offers nothing else to wait on.
func (tp *toxiproxy) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := tp.call(ctx, http.MethodGet, "/version", nil, nil); err == nil {
			return nil
		}
		select {
		case <-tp.exited:
			return fmt.Errorf("toxiproxy-server exited during start")
		case <-ctx.Done():
			return fmt.Errorf("toxiproxy at %s not ready after %v", tp.api, timeout)
		case <-tick.C:
		}
	}
}

// call sends one API request with body (JSON-encoded unless nil) and
// decodes the answer into out (unless nil).
func (tp *toxiproxy) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, tp.api+path, rd)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("toxiproxy %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func (tp *toxiproxy) mustCall(t *testing.T, method, path string, body, out any) {
	t.Helper()
	// Toxiproxy answers removing a toxic once the toxic's connections let
	// go of it: a stalled link on a loaded 2-core box under GOMAXPROCS=1
	// took more than 10 s once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tp.call(ctx, method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

// proxy creates a proxy named name on a free port in front of upstream
// (http://HOST:PORT or HOST:PORT).
func (tp *toxiproxy) proxy(t *testing.T, name, upstream string) *toxicProxy {
	t.Helper()
	if u, err := url.Parse(upstream); err == nil && u.Host != "" {
		upstream = u.Host
	}
	var created struct {
		Listen string `json:"listen"`
	}
	tp.mustCall(t, http.MethodPost, "/proxies", map[string]any{
		"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": true,
	}, &created)
	return &toxicProxy{tp: tp, name: name, url: "http://" + created.Listen}
}

// add adds a toxic; remove takes it away again.
func (p *toxicProxy) add(t *testing.T, tx toxic) {
	t.Helper()
	if tx.Stream == "" {
		tx.Stream = "downstream"
	}
	p.tp.mustCall(t, http.MethodPost, "/proxies/"+p.name+"/toxics", tx, nil)
}

func (p *toxicProxy) remove(t *testing.T, name string) {
	t.Helper()
	p.tp.mustCall(t, http.MethodDelete, "/proxies/"+p.name+"/toxics/"+name, nil, nil)
}
