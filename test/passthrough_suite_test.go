//go:build e2e

package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// passthroughSuiteEnv, set to 1, runs the correctness suite with
// passthrough on: every foreground mount of the data set that names no
// cache dir of its own gets one holding every shard whole (a copy of one
// warmed once), so its opens are passed to the kernel.
const passthroughSuiteEnv = "SHARDFS_E2E_PASSTHROUGH"

var wholeTemplate struct {
	once sync.Once
	dir  string
	err  error
}

// passthroughSuiteFlags are the flags that give a mount of source a cache
// of whole shards under SHARDFS_E2E_PASSTHROUGH=1; none otherwise. They go
// before the test's own flags, which win.
func passthroughSuiteFlags(t *testing.T, source string, args []string) []string {
	t.Helper()
	if os.Getenv(passthroughSuiteEnv) != "1" || source != e2e.source() || slices.Contains(args, "--cache-dir") {
		return nil
	}
	wholeTemplate.once.Do(func() {
		wholeTemplate.dir = filepath.Join(e2e.tmp, "whole-template")
		args := append([]string{"warm", e2e.source()}, append(e2e.endpoint(), cacheFlags(wholeTemplate.dir, wholeCacheSize)...)...)
		if r := runShardfs(e2e.env(), warmTimeout, args...); r.code != 0 || r.err != nil {
			wholeTemplate.err = fmt.Errorf("exit %d, %v: %s", r.code, r.err, r.stderr)
		}
	})
	if wholeTemplate.err != nil {
		t.Fatalf("%s=1: warming the whole-shard template: %v", passthroughSuiteEnv, wholeTemplate.err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(wholeTemplate.dir, "shards"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the whole-shard template: %v\n%s", err, out)
	}
	return cacheFlags(dir, wholeCacheSize)
}

// suiteOpens counts, under SHARDFS_E2E_PASSTHROUGH=1, the opens of the
// mounts it gave a whole-shard cache: TestMain reports them.
var suiteOpens struct {
	mu                      sync.Mutex
	mounts                  int
	passedThrough, byDaemon float64
}

func countSuiteOpens(m *fgMount) {
	raw, err := os.ReadFile(filepath.Join(m.dir, ".shardfs", "stats"))
	if err != nil {
		return // the test unmounted it already
	}
	var samples []statSample
	if json.Unmarshal(raw, &samples) != nil {
		return
	}
	suiteOpens.mu.Lock()
	defer suiteOpens.mu.Unlock()
	suiteOpens.mounts++
	for _, s := range samples {
		switch s.Name {
		case "shardfs_passthrough_opens_total":
			suiteOpens.passedThrough += s.Value
		case "shardfs_daemon_opens_total":
			suiteOpens.byDaemon += s.Value
		}
	}
}

// reportSuiteOpens says how much of the suite ran passed through.
func reportSuiteOpens() {
	if os.Getenv(passthroughSuiteEnv) != "1" {
		return
	}
	suiteOpens.mu.Lock()
	defer suiteOpens.mu.Unlock()
	fmt.Printf("%s=1: %d mounts given whole shards (counted at their end): %.0f opens passed through, %.0f served by the daemon\n",
		passthroughSuiteEnv, suiteOpens.mounts, suiteOpens.passedThrough, suiteOpens.byDaemon)
}
