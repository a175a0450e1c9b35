//go:build e2e

package test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeRandomFiles writes files of random bytes of the given sizes under
// dir and returns their contents.
func writeRandomFiles(t *testing.T, dir string, sizes map[string]int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for name, size := range sizes {
		data := make([]byte, size)
		rand.Read(data)
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	return files
}

// TestGDSClientThroughMount runs the Python client's protocol tests
// (python/tests/integration/test_client.py) against a real mount with a cache ring:
// READ into registered /dev/shm buffers, every error case, LEASE extents
// read straight from the ring file, blocks of the shared RAM tier leased
// and copied from its /dev/shm file, and a.tar, warmed into a whole-shard
// file before the mount, read from that file by read_into (and after it
// was deleted under the client, through the other paths), compared with
// the source.
func TestGDSClientThroughMount(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeRandomFiles(t, src, map[string]int{"a.tar": 3<<20 + 123, "sub/b.tar": 9 << 20, "small.bin": 4096})
	cache := []string{"--cache-dir", t.TempDir(), "--cache-size", "64MiB"}
	r := mustRun(t, e2e.env(), warmTimeout, append([]string{"warm", src, "--include", "a.tar"}, cache...)...)
	if !strings.Contains(r.stdout, "1 held as whole files") {
		t.Fatalf("warm did not make a.tar whole: %s", r.stdout)
	}
	// A shared RAM tier, which this machine (no GPU) has only when asked
	// for: the client's LEASE_FROM_RAM checks run against it.
	m := mountShardfs(t, src, append(cache, "--memory-cache-shared", "on", "--memory-cache-size", "64MiB")...)
	cmd := pythonCmd(filepath.Join(e2e.root, "python/tests/integration/test_client.py"), "--mount", m.dir, "--source", src,
		"--whole", "a.tar", "--cold", "sub/b.tar")
	cmd.Env = append(cmd.Env, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("test_client.py:\n%s", out)
	if err != nil {
		t.Fatalf("gds client tests failed: %v", err)
	}
	if !regexp.MustCompile(`(?m)^[1-9][0-9]* passed, 0 failed$`).Match(out) {
		t.Fatalf("gds client tests did not report a clean pass")
	}
}
