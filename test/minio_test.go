//go:build e2e

package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Fixed credentials of the throwaway MinIO (the same as scripts/lib.sh).
const (
	accessKey = "shardfs-test"
	secretKey = "shardfs-test-secret"
	region    = "us-east-1"
)

// minioServer is one MinIO process on a free 127.0.0.1 port with its own
// data directory; stop kills it and waits for it.
type minioServer struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

func startMinio(bin, tmp string) (*minioServer, error) {
	dir := filepath.Join(tmp, "minio")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	console, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "minio.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "server", "--quiet", "--address", addr,
		"--console-address", "127.0.0.1:"+strconv.Itoa(console),
		"--certs-dir", filepath.Join(dir, "certs"), filepath.Join(dir, "drive"))
	var env []string
	for _, kv := range os.Environ() {
		// The store is not under test: GOMAXPROCS=1 runs must not starve it.
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start minio: %w", err)
	}
	m := &minioServer{url: "http://" + addr, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		close(m.exited)
	}()
	if err := m.waitReady(60 * time.Second); err != nil {
		m.stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w\nminio log:\n%s", err, log)
	}
	return m, nil
}

// waitReady polls the health endpoint: a process coming up has no other
// signal to wait on.
func (m *minioServer) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.url+"/minio/health/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-m.exited:
			return fmt.Errorf("minio exited during start")
		case <-ctx.Done():
			return fmt.Errorf("minio at %s not ready after %v", m.url, timeout)
		case <-tick.C:
		}
	}
}

func (m *minioServer) stop() {
	m.cmd.Process.Signal(os.Interrupt)
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		m.cmd.Process.Kill()
		<-m.exited
	}
}

// freePort returns a port nothing listens on now on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
