//go:build e2e

package test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The distributed fault test runs inside the client namespace of
// scripts/minio_cluster.sh: one `ip netns exec` for the whole scenario
// (it brings its own mount namespace, where the mount lives), as this
// test binary again with distributedEnv set, before TestMain.
const (
	distributedEnv = "SHARDFS_DISTRIBUTED_DIR"
	clusterNode1   = "http://10.77.0.11:9000"
	clusterRetry   = 15 * time.Second
)

func init() {
	if dir := os.Getenv(distributedEnv); dir != "" {
		if err := distributedScenario(dir); err != nil {
			fmt.Println("FAIL:", err)
			os.Exit(1)
		}
		fmt.Println("PASS")
		os.Exit(0)
	}
}

// TestDistributedMinIONodeFaults: a mount of a four-node distributed MinIO
// (one node per network namespace). A node killed with SIGKILL during a
// full read of every shard, then started again: every byte right, no read
// fails. The node the mount talks to stopped: a read fails with EIO within
// --retry-timeout (never hangs), and succeeds once the node is back.
func TestDistributedMinIONodeFaults(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("network namespaces need root (CI runs the tests as root)")
	}
	dir := t.TempDir()
	ns := fmt.Sprintf("sfs-t%d", os.Getpid()%100000)
	script := filepath.Join(e2e.root, "scripts", "minio_cluster.sh")
	clusterEnv := append(os.Environ(), "SHARDFS_NETNS="+ns, "MINIO="+filepath.Join(e2e.root, ".tools", "bin", "minio"),
		"MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey)
	run := func(args ...string) error {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = clusterEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("minio_cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	t.Cleanup(func() {
		if err := run("down", dir); err != nil {
			t.Error(err)
		}
		for _, n := range []string{ns, ns + "-m1"} {
			if exec.Command("ip", "netns", "exec", n, "true").Run() == nil {
				t.Errorf("network namespace %s left behind", n)
			}
		}
	})
	if err := run("up", dir); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, self)
	cmd.Env = append(clusterEnv, distributedEnv+"="+dir, "SHARDFS_BIN="+e2e.bin, "SHARDFS_CLUSTER_SCRIPT="+script)
	out, err := cmd.CombinedOutput()
	t.Logf("scenario in namespace %s:\n%s", ns, out)
	if err != nil || !strings.Contains(string(out), "\nPASS\n") {
		t.Fatalf("scenario failed: %v", err)
	}
}

// distributedScenario is the test's body inside the client namespace.
func distributedScenario(dir string) error {
	say := func(format string, args ...any) { fmt.Printf(time.Now().Format("15:04:05.000 ")+format+"\n", args...) }
	cluster := func(args ...string) error {
		out, err := exec.Command("bash", append([]string{os.Getenv("SHARDFS_CLUSTER_SCRIPT")}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("minio_cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}

	// Twelve shards of 6 MiB: a/ read while a node dies, b/ read while the
	// mount's own node is down.
	src := filepath.Join(dir, "src")
	sums := map[string]string{}
	rng := rand.New(rand.NewPCG(16, 4))
	for i := range 12 {
		key := fmt.Sprintf("a/shard-%02d.tar", i)
		if i >= 8 {
			key = fmt.Sprintf("b/shard-%02d.tar", i-8)
		}
		data := make([]byte, 6<<20+i*4099)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		sum := sha256.Sum256(data)
		sums[key] = hex.EncodeToString(sum[:])
		path := filepath.Join(src, key)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	rclone := func(args ...string) error {
		cmd := exec.Command("rclone", args...)
		var env []string
		for _, kv := range os.Environ() {
			// rclone's S3 client refuses AWS_CA_BUNDLE; the endpoint is plain http.
			if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "RCLONE_CONFIG=/dev/null", "RCLONE_S3_PROVIDER=Minio", "RCLONE_S3_ENDPOINT="+clusterNode1,
			"RCLONE_S3_ACCESS_KEY_ID="+accessKey, "RCLONE_S3_SECRET_ACCESS_KEY="+secretKey, "RCLONE_S3_REGION="+region)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("rclone %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := rclone("mkdir", ":s3:dist"); err != nil {
		return err
	}
	if err := rclone("copy", src, ":s3:dist"); err != nil {
		return err
	}
	say("uploaded 12 shards to the cluster through node 1")

	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mount := exec.Command(os.Getenv("SHARDFS_BIN"), "mount", "--foreground", "--endpoint-url", clusterNode1,
		"--retry-timeout", clusterRetry.String(), "--prefetch-next", "0", "--memory-cache-size", "0", "s3://dist", mnt)
	mount.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey, "AWS_REGION="+region, "AWS_EC2_METADATA_DISABLED=true")
	logs := &lockedBuffer{}
	mount.Stdout, mount.Stderr = logs, logs
	if err := mount.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- mount.Wait() }()
	defer func() {
		mount.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			mount.Process.Kill()
		}
	}()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs.String(), "msg=mounted"); {
		if time.Now().After(deadline) {
			return fmt.Errorf("not mounted after 60 s:\n%s", logs.String())
		}
		select {
		case err := <-exited:
			return fmt.Errorf("shardfs exited: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	say("mounted")
	check := func(key string) error {
		sum, _, err := fileSHA256(filepath.Join(mnt, key))
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		if sum != sums[key] {
			return fmt.Errorf("%s: sha256 %s, want %s", key, sum, sums[key])
		}
		return nil
	}

	// 1. Node 3 killed during a full read of a/, then started again.
	for i := range 8 {
		if i == 2 {
			if err := cluster("kill", dir, "3"); err != nil {
				return err
			}
			say("node 3 killed with SIGKILL")
		}
		key := fmt.Sprintf("a/shard-%02d.tar", i)
		if err := check(key); err != nil {
			return fmt.Errorf("with node 3 killed: %w", err)
		}
	}
	say("all 8 shards of a/ right with node 3 down")
	if err := cluster("start", dir, "3"); err != nil {
		return err
	}
	say("node 3 back")
	for i := range 8 {
		if err := check(fmt.Sprintf("a/shard-%02d.tar", i)); err != nil {
			return fmt.Errorf("after node 3 came back: %w", err)
		}
	}

	// 2. The node the mount talks to stopped: EIO within the retry budget.
	if err := cluster("kill", dir, "1"); err != nil {
		return err
	}
	say("node 1 (the mount's endpoint) killed")
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- check("b/shard-00.tar") }()
	select {
	case err := <-done:
		took := time.Since(start)
		if err == nil {
			return errors.New("a read through a dead endpoint succeeded")
		}
		if !errors.Is(err, syscall.EIO) {
			return fmt.Errorf("read through a dead endpoint: %v, want EIO", err)
		}
		// The kernel reads a page again itself when the read-ahead READ
		// that covered it failed; that read fails at once (the range just
		// failed), so one read(2) waits out one budget, not two.
		if took > clusterRetry+2*time.Second {
			return fmt.Errorf("EIO after %v, retry budget %v", took, clusterRetry)
		}
		say("read with node 1 down: EIO after %v (retry budget %v)", took.Round(time.Millisecond), clusterRetry)
	case <-time.After(clusterRetry + 60*time.Second):
		return fmt.Errorf("a read through a dead endpoint hung for %v", time.Since(start))
	}
	if err := cluster("start", dir, "1"); err != nil {
		return err
	}
	say("node 1 back")
	for i := range 4 {
		if err := check(fmt.Sprintf("b/shard-%02d.tar", i)); err != nil {
			return fmt.Errorf("after node 1 came back: %w", err)
		}
	}
	say("all 4 shards of b/ right after node 1 came back")
	mount.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("shardfs after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		mount.Process.Signal(syscall.SIGQUIT) // its goroutines, into the log, and exit
		select {
		case err := <-exited:
			exited <- err // for the deferred stop
		case <-time.After(10 * time.Second):
			mount.Process.Kill()
		}
		return fmt.Errorf("shardfs still running 30 s after SIGTERM; its log:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "\n"); n > 0 {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		warns := 0
		for sc.Scan() {
			if strings.Contains(sc.Text(), "level=WARN") || strings.Contains(sc.Text(), "level=ERROR") {
				warns++
			}
		}
		say("daemon log: %d lines, %d warnings or errors", n, warns)
	}
	return nil
}
