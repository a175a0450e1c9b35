//go:build e2e

package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const csiCallTimeout = 2 * time.Minute

// csiPlugin is a `shardfs csi` process and a client of its socket.
type csiPlugin struct {
	cmd    *exec.Cmd
	output *lockedBuffer
	exited chan struct{}
	conn   *grpc.ClientConn
	node   csipb.NodeClient
}

// startCSIPlugin runs the plugin on sock with cacheRoot, without AWS
// credentials of its own (volumes bring theirs in secrets), and waits
// until it answers Probe. The test's cleanup kills it.
func startCSIPlugin(t *testing.T, sock, cacheRoot string) *csiPlugin {
	t.Helper()
	return runCSIPlugin(t, sock, exec.Command(e2e.bin, csiArgs(sock, cacheRoot)...))
}

// csiArgs is the plugin's command line after the program name.
func csiArgs(sock, cacheRoot string, flags ...string) []string {
	return append([]string{"csi", "--endpoint", "unix://" + sock, "--node-id", "node-e2e", "--cache-root", cacheRoot, "--log-level", "debug"}, flags...)
}

// runCSIPlugin starts cmd, a command that becomes the plugin serving
// sock, as startCSIPlugin does.
func runCSIPlugin(t *testing.T, sock string, cmd *exec.Cmd) *csiPlugin {
	t.Helper()
	p := &csiPlugin{cmd: cmd, output: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = e2e.env("AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start shardfs csi: %v", err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.conn = conn
	p.node = csipb.NewNodeClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), mountTimeout)
	defer cancel()
	// WaitForReady blocks the call until the socket accepts: an event,
	// not a timer.
	if _, err := csipb.NewIdentityClient(conn).Probe(ctx, &csipb.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("shardfs csi does not answer Probe: %v\noutput:\n%s", err, p.output.String())
	}
	return p
}

// kill ends the plugin with SIGKILL, as a crash would.
func (p *csiPlugin) kill() {
	p.conn.Close()
	p.cmd.Process.Kill()
	<-p.exited
}

func mountCap() *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
	}
}

func testSecret() map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey}
}

func (p *csiPlugin) publish(volumeID, target string, vctx, secrets map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), csiCallTimeout)
	defer cancel()
	_, err := p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: volumeID, TargetPath: target, VolumeCapability: mountCap(),
		VolumeContext: vctx, Secrets: secrets, Readonly: true,
	})
	return err
}

func (p *csiPlugin) unpublish(volumeID, target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), csiCallTimeout)
	defer cancel()
	_, err := p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target})
	return err
}

// checkAllObjects reads every object under dir and compares its sha256.
func checkAllObjects(t *testing.T, when, dir string) {
	t.Helper()
	checkObjects(t, when, dir, e2e.objects)
}

// checkObjects reads objs under dir and compares their sha256.
func checkObjects(t *testing.T, when, dir string, objs []object) {
	t.Helper()
	for _, o := range objs {
		sum, n, err := readSHA256(filepath.Join(dir, filepath.FromSlash(o.key)), 1<<20)
		if err != nil || sum != o.sha256 || n != o.size {
			t.Fatalf("%s: %s in %s: read %d bytes, sha256 %s, err %v; want %d bytes, %s", when, o.key, dir, n, sum, err, o.size, o.sha256)
		}
	}
}

// cleanUpTarget detaches whatever a failed test left at target.
func cleanUpTarget(target string) {
	if isMounted(target) {
		exec.Command("fusermount3", "-u", "-z", target).Run()
	}
	for _, pid := range serverPids(target) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestCSIKubelet plays kubelet over the plugin's socket.
func TestCSIKubelet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock, cacheRoot := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "cache")
	pods := filepath.Join(dir, "pods")
	targetA, targetB := filepath.Join(pods, "a", "mount"), filepath.Join(pods, "b", "mount")
	for _, target := range []string{targetA, targetB} {
		os.MkdirAll(filepath.Dir(target), 0o750)
		t.Cleanup(func() { cleanUpTarget(target) })
	}
	// The rings hold the whole data set: this test is about the plugin,
	// not about eviction.
	volA := map[string]string{"source": e2e.source(), "endpoint_url": e2e.minio.url, "cache_size": "1GiB", "csi.storage.k8s.io/pod.name": "a"}
	// direct: every read reaches the daemon, so a read after the unmount
	// cannot be answered from the page cache.
	volB := map[string]string{"source": e2e.source(), "endpoint_url": e2e.minio.url, "cache_size": "1GiB", "page_cache": "direct"}

	plugin := startCSIPlugin(t, sock, cacheRoot)
	if err := plugin.publish("vol-a", targetA, volA, testSecret()); err != nil {
		t.Fatalf("publish A: %v\n%s", err, plugin.output.String())
	}
	checkAllObjects(t, "after publish", targetA)

	// The daemon has the credentials in its environment, never in argv.
	pids := serverPids(targetA)
	if len(pids) != 1 {
		t.Fatalf("want one daemon serving %s, found %v", targetA, pids)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pids[0]))
	if bytes.Contains(cmdline, []byte(secretKey)) {
		t.Errorf("the secret key is in the daemon's command line")
	}
	if !bytes.Contains(environ, []byte("AWS_SECRET_ACCESS_KEY="+secretKey)) {
		t.Errorf("the secret key is not in the daemon's environment")
	}
	logs, _ := filepath.Glob(filepath.Join(cacheRoot, ".csi-*", "*"))
	for _, f := range logs {
		if raw, err := os.ReadFile(f); err == nil && bytes.Contains(raw, []byte(secretKey)) {
			t.Errorf("%s holds the secret key", f)
		}
	}
	if strings.Contains(plugin.output.String(), secretKey) {
		t.Errorf("the plugin's log holds the secret key")
	}

	if err := plugin.publish("vol-a", targetA, volA, testSecret()); err != nil {
		t.Errorf("publishing A again: %v", err)
	}
	if err := plugin.publish("vol-a", targetA, volB, testSecret()); status.Code(err) != codes.AlreadyExists {
		t.Errorf("publishing A with other settings: got %v, want AlreadyExists", err)
	}

	if err := plugin.publish("vol-b", targetB, volB, testSecret()); err != nil {
		t.Fatalf("publish B: %v", err)
	}
	obj := e2e.objects[len(e2e.objects)-1]
	for _, o := range e2e.objects {
		if o.size > obj.size {
			obj = o
		}
	}
	reader, err := os.Open(filepath.Join(targetB, filepath.FromSlash(obj.key)))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	buf := make([]byte, 4096)
	if _, err := reader.ReadAt(buf, 0); err != nil {
		t.Fatalf("reading B: %v", err)
	}
	if err := plugin.unpublish("vol-b", targetB); err != nil {
		t.Fatalf("unpublish B while a reader holds a file: %v", err)
	}
	if isMounted(targetB) {
		t.Errorf("%s still mounted after unpublish", targetB)
	}
	if pids := serverPids(targetB); len(pids) > 0 {
		t.Errorf("daemon %v of B still running after unpublish", pids)
	}
	// The README promises ENOTCONN to a reader whose volume went away.
	if _, err := reader.ReadAt(buf, obj.size/2); !errorIs(err, syscall.ENOTCONN) {
		t.Errorf("a reader of an unpublished volume got %v, want ENOTCONN", err)
	}
	if err := plugin.publish("vol-b", targetB, volB, testSecret()); err != nil {
		t.Fatalf("publish B again: %v", err)
	}

	// A crash of the plugin leaves the mounts serving; the new plugin
	// recognises and unpublishes them.
	plugin.kill()
	checkAllObjects(t, "B with the plugin killed", targetB)
	plugin = startCSIPlugin(t, sock, cacheRoot)
	checkAllObjects(t, "A after the plugin restarted", targetA)
	if err := plugin.publish("vol-a", targetA, volA, testSecret()); err != nil {
		t.Errorf("publishing A again after a restart: %v", err)
	}
	if err := plugin.publish("vol-b", targetB, volA, testSecret()); status.Code(err) != codes.AlreadyExists {
		t.Errorf("publishing B with other settings after a restart: got %v, want AlreadyExists", err)
	}
	// A daemon killed leaves a dead mount; publishing the volume again
	// replaces it.
	for _, pid := range serverPids(targetA) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if pids := waitNoServer(targetA, unmountTimeout); len(pids) > 0 {
		t.Fatalf("daemon %v of A survived SIGKILL", pids)
	}
	if err := plugin.publish("vol-a", targetA, volA, testSecret()); err != nil {
		t.Fatalf("publishing A again after its daemon died: %v", err)
	}
	checkAllObjects(t, "A after its daemon died and it was published again", targetA)

	plugin.unpublishAll(t, "after a restart", map[string]string{"vol-a": targetA, "vol-b": targetB})
}

// unpublishAll unpublishes each volume (volume ID to target) and checks
// that nothing of it is left: no mount, no target directory, no daemon.
func (p *csiPlugin) unpublishAll(t *testing.T, when string, volumes map[string]string) {
	t.Helper()
	for volumeID, target := range volumes {
		if err := p.unpublish(volumeID, target); err != nil {
			t.Errorf("unpublish %s %s: %v", volumeID, when, err)
		}
		if isMounted(target) {
			t.Errorf("%s still mounted", target)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("%s not removed (stat: %v)", target, err)
		}
		if pids := serverPids(target); len(pids) > 0 {
			t.Errorf("daemon %v of %s still running", pids, volumeID)
		}
	}
}

func errorIs(err error, errno syscall.Errno) bool {
	for err != nil {
		if e, ok := err.(syscall.Errno); ok {
			return e == errno
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TestCSIInvalidArgument: a bad volume context or secret is refused with
// the CLI's line and leaves nothing mounted or running.
func TestCSIInvalidArgument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plugin := startCSIPlugin(t, filepath.Join(dir, "csi.sock"), filepath.Join(dir, "cache"))

	// The line the CLI prints for the same option, through mount(8)'s form.
	mnt := t.TempDir()
	cli := runShardfs(e2e.env(), mountTimeout, e2e.source(), mnt, "-o", "no_such_option=1")
	cliLine := strings.TrimPrefix(strings.TrimSpace(cli.stderr), "shardfs: ")
	if cli.code == 0 || cliLine == "" {
		t.Fatalf("the CLI accepted an unknown option: exit %d, %q", cli.code, cli.stderr)
	}
	cliSize := runShardfs(e2e.env(), mountTimeout, e2e.source(), mnt, "-o", "cache_size=lots")
	cliSizeLine := strings.TrimPrefix(strings.TrimSpace(cliSize.stderr), "shardfs: ")

	good := map[string]string{"source": e2e.source(), "endpoint_url": e2e.minio.url}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for gk, gv := range good {
			m[gk] = gv
		}
		return m
	}
	cases := []struct {
		name     string
		vctx     map[string]string
		secret   map[string]string
		wantLine string // "" for any one line
	}{
		{"unknown option", with("no_such_option", "1"), testSecret(), cliLine},
		{"bad size", with("cache_size", "lots"), testSecret(), cliSizeLine},
		{"no source", map[string]string{"endpoint_url": e2e.minio.url}, testSecret(), ""},
		{"wrong secret key", good, map[string]string{"AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": "wrong"}, ""},
		{"unknown secret field", good, map[string]string{"aws_access_key_id": accessKey}, ""},
	}
	for i, c := range cases {
		target := filepath.Join(dir, "pods", strconv.Itoa(i), "mount")
		os.MkdirAll(filepath.Dir(target), 0o750)
		t.Cleanup(func() { cleanUpTarget(target) })
		err := plugin.publish("vol-"+strconv.Itoa(i), target, c.vctx, c.secret)
		msg := status.Convert(err).Message()
		switch {
		case status.Code(err) != codes.InvalidArgument:
			t.Errorf("%s: got %v, want InvalidArgument", c.name, err)
		case c.wantLine != "" && msg != c.wantLine:
			t.Errorf("%s: got %q, want the CLI's %q", c.name, msg, c.wantLine)
		case msg == "" || strings.Contains(msg, "\n"):
			t.Errorf("%s: want one line, got %q", c.name, msg)
		}
		if isMounted(target) {
			t.Errorf("%s: %s left mounted", c.name, target)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("%s: %s left behind (stat: %v)", c.name, target, err)
		}
		if pids := serverPids(target); len(pids) > 0 {
			t.Errorf("%s: daemon %v left running", c.name, pids)
		}
	}
}
