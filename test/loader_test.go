//go:build e2e

package test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDataLoaderReadsEveryShard: a PyTorch DataLoader with four workers
// streams every shard through the mount and verifies every sample.
func TestDataLoaderReadsEveryShard(t *testing.T) {
	t.Parallel()
	m := mountShardfs(t, e2e.source())
	cmd := exec.Command(sysPython, filepath.Join(e2e.root, "scripts", "loader_read.py"), m.dir,
		"--workers", "4", "--expect-samples", strconv.Itoa(e2e.samples))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loader_read.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"ok": true`) {
		t.Errorf("loader_read.py did not report success:\n%s", out)
	}
}
