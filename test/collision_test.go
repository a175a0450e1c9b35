//go:build e2e

package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeyThatIsAlsoADirectory mounts a listing in which "nested" is both an
// object and the prefix of others, as S3 allows and a directory tree does
// not. MinIO refuses to hold both, so the listing comes from a manifest
// with the object "nested" added. The directory must win, the object stay
// hidden with a warning that names it, and every real shard read right.
func TestKeyThatIsAlsoADirectory(t *testing.T) {
	t.Parallel()
	r := mustRun(t, e2e.env(), 2*time.Minute, "manifest", e2e.source(), "--endpoint-url", e2e.minio.url)
	lines := strings.SplitAfter(strings.TrimSpace(r.stdout), "\n")
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatalf("manifest line %q: %v", lines[0], err)
	}
	entry["key"], entry["size"] = "nested", 1234
	extra, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	// The colliding object listed first and last: the order must not matter.
	for name, order := range map[string][]string{
		"first": append([]string{string(extra) + "\n"}, lines...),
		"last":  append(append([]string{}, lines...), "\n"+string(extra)+"\n"),
	} {
		t.Run(name, func(t *testing.T) {
			manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
			if err := os.WriteFile(manifest, []byte(strings.Join(order, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			m := mountShardfs(t, e2e.source(), "--manifest", manifest)
			if st, err := os.Stat(m.path("nested")); err != nil || !st.IsDir() {
				t.Fatalf("nested: %v, %v; want the directory", st, err)
			}
			checkFind(t, m.dir, e2e.objects)
			for _, o := range e2e.objects {
				if strings.HasPrefix(o.key, "nested/") {
					sum, size, err := fileSHA256(m.path(o.key))
					if err != nil || size != o.size || sum != o.sha256 {
						t.Errorf("%s: %d bytes, sha256 %s, %v; want %d bytes, %s", o.key, size, sum, err, o.size, o.sha256)
					}
				}
			}
			if out := m.output.String(); !strings.Contains(out, "key not shown in the mount") || !strings.Contains(out, "key=nested") {
				t.Errorf("no warning naming the hidden object nested in the log:\n%s", out)
			}
		})
	}
}
