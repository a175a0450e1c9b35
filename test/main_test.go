//go:build e2e

package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// e2e is the environment every test shares: set up once by TestMain before
// any test runs and never changed afterwards.
var e2e *harness

func TestMain(m *testing.M) {
	h, err := setUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "end-to-end setup failed: %v\n", err)
		if h != nil {
			h.tearDown()
		}
		os.Exit(1)
	}
	e2e = h
	code := m.Run()
	reportSuiteOpens()
	h.tearDown()
	os.Exit(code)
}

func setUp() (*harness, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	if err := checkPrerequisites(root); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "shardfs-e2e-")
	if err != nil {
		return nil, err
	}
	h := &harness{root: root, tmp: tmp, bucket: "shardfs-e2e", prefix: "train"}
	if h.bin, err = buildShardfs(root, tmp); err != nil {
		return h, err
	}
	if h.minio, err = startMinio(filepath.Join(root, ".tools", "bin", "minio"), tmp); err != nil {
		return h, err
	}
	if err := h.generateDataset(); err != nil {
		return h, err
	}
	if err := h.uploadDataset(); err != nil {
		return h, err
	}
	return h, nil
}

func (h *harness) tearDown() {
	if h.minio != nil {
		h.minio.stop()
	}
	os.RemoveAll(h.tmp)
}

// buildShardfs builds the binary under test once, with the race detector
// when SHARDFS_TEST_RACE=1 (scripts/test.sh sets it for the -race run).
func buildShardfs(root, tmp string) (string, error) {
	bin := filepath.Join(tmp, "shardfs")
	args := []string{"build", "-o", bin}
	if os.Getenv("SHARDFS_TEST_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/shardfs")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/shardfs: %v\n%s", err, out)
	}
	return bin, nil
}
