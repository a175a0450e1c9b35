//go:build e2e

package test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// unitFile is the systemd unit the repository ships.
const unitFile = "deploy/shardfs@.service"

// unitCommands returns the ExecStart and ExecStop command lines of the
// unit, for the instance whose mount point is dir and whose SOURCE is
// source, with the binary under test in place of the installed one.
func unitCommands(t *testing.T, source, dir string) (start, stop []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(e2e.root, unitFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := strings.NewReplacer("/usr/local/bin/shardfs", e2e.bin, "${SOURCE}", source, "/mnt/%i", dir)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), "=")
		switch key {
		case "ExecStart":
			start = strings.Fields(r.Replace(value))
		case "ExecStop":
			stop = strings.Fields(r.Replace(value))
		}
	}
	if len(start) == 0 || len(stop) == 0 {
		t.Fatalf("%s: no ExecStart or ExecStop line", unitFile)
	}
	return start, stop
}

// notifyListener is the service manager's end of NOTIFY_SOCKET.
type notifyListener struct {
	path string
	msgs chan string
}

func listenNotify(t *testing.T) *notifyListener {
	t.Helper()
	n := &notifyListener{path: filepath.Join(t.TempDir(), "notify.sock"), msgs: make(chan string, 16)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(n.msgs)
				return
			}
			n.msgs <- string(buf[:k])
		}
	}()
	return n
}

// next waits for the next message.
func (n *notifyListener) next(timeout time.Duration) (string, error) {
	select {
	case m, ok := <-n.msgs:
		if !ok {
			return "", errors.New("notify socket closed")
		}
		return m, nil
	case <-time.After(timeout):
		return "", errors.New("no message")
	}
}

func TestSystemdUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(e2e.root, unitFile))
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart names an executable: the binary under test stands in.
	path := filepath.Join(t.TempDir(), "shardfs@data.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/shardfs", e2e.bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
	for _, want := range []string{"Type=notify", "--foreground"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("%s lacks %q", unitFile, want)
		}
	}
}

// TestSystemdNotify runs the unit's ExecStart as systemd would, with
// NOTIFY_SOCKET on a socket the test listens on, and a store whose listing
// takes a second and a half: READY=1 must come only once the mount answers,
// and ExecStop must unmount, with STOPPING=1, and end the daemon cleanly.
func TestSystemdNotify(t *testing.T) {
	var listed atomic.Bool
	proxy := startStoreProxy(t, &storeProxy{bucket: e2e.bucket, afterList: func() {
		time.Sleep(1500 * time.Millisecond)
		listed.Store(true)
	}})
	notify := listenNotify(t)
	dir := t.TempDir()
	start, stop := unitCommands(t, e2e.source(), dir)
	cmd := exec.Command(start[0], start[1:]...)
	cmd.Env = append(e2e.env(), "NOTIFY_SOCKET="+notify.path, "SHARDFS_ENDPOINT_URL="+proxy.url)
	var output lockedBuffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if isMounted(dir) {
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
		cmd.Process.Kill()
	})

	msg, err := notify.next(mountTimeout)
	if err != nil || msg != "READY=1" {
		t.Fatalf("first notification %q (%v), want READY=1\noutput:\n%s", msg, err, output.String())
	}
	// The checks run right as READY arrives: a READY sent before the
	// listing (1.5 s) or the mount would find nothing here.
	if !listed.Load() || !isMounted(dir) {
		t.Fatalf("READY=1 arrived with the listing done %v and %s mounted %v; want both", listed.Load(), dir, isMounted(dir))
	}
	small := e2e.smallShards()[0]
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(small.key))); err != nil {
		t.Fatalf("READY=1 arrived but the mount does not answer: %v", err)
	}
	checkShards(t, dir, e2e.smallShards()[:2])

	stopCmd := exec.Command(stop[0], stop[1:]...)
	stopCmd.Env = e2e.env()
	if out, err := stopCmd.CombinedOutput(); err != nil {
		t.Fatalf("ExecStop %s: %v\n%s", strings.Join(stop, " "), err, out)
	}
	if msg, err := notify.next(unmountTimeout); err != nil || msg != "STOPPING=1" {
		t.Errorf("after ExecStop: notification %q (%v), want STOPPING=1", msg, err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("daemon after ExecStop: %v (want exit status 0)\noutput:\n%s", err, output.String())
		}
	case <-time.After(unmountTimeout):
		t.Fatalf("daemon still running %v after ExecStop", unmountTimeout)
	}
	if isMounted(dir) {
		t.Errorf("%s still mounted after ExecStop", dir)
	}
}

// TestSystemdNotifyNotOnFailure: a mount that fails never says READY=1.
func TestSystemdNotifyNotOnFailure(t *testing.T) {
	notify := listenNotify(t)
	dir := t.TempDir()
	start, _ := unitCommands(t, "s3://no-such-bucket-"+strings.ToLower(t.Name()), dir)
	cmd := exec.Command(start[0], start[1:]...)
	cmd.Env = append(e2e.env(), "NOTIFY_SOCKET="+notify.path, "SHARDFS_ENDPOINT_URL="+e2e.minio.url)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).ExitStatus() == 0 {
		t.Errorf("mount of a missing bucket: %v, want a non-zero exit\n%s", err, out)
	}
	if msg, err := notify.next(200 * time.Millisecond); err == nil {
		t.Errorf("a failed mount sent %q", msg)
	}
	if isMounted(dir) {
		t.Errorf("%s mounted after a failed mount", dir)
	}
}
