//go:build e2e

package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The data set: 20 shards at the top, 2 under a nested prefix, one whose
// name has spaces and non-ASCII characters, one over 200 MiB, and an empty
// object. Small shards keep the suite quick on two cores.
const (
	largeKey = "large/shard-large.tar"
	emptyKey = "misc/empty.bin"
	oddKey   = "odd names/shard ünïcødé 数据 #1.tar"
)

func (h *harness) generateDataset() error {
	h.data = filepath.Join(h.tmp, "data")
	summary := filepath.Join(h.tmp, "summary.json")
	cmd := exec.Command(sysPython, filepath.Join(h.root, "scripts", "gen_shards.py"),
		h.data, "20", "8", "40K",
		"--nested", "nested/deeper", "--nested-count", "2",
		"--odd-name", "--empty", emptyKey, "--large", "210M", "--summary", summary)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gen_shards.py: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(summary)
	if err != nil {
		return err
	}
	var totals struct{ Samples int }
	if err := json.Unmarshal(raw, &totals); err != nil {
		return fmt.Errorf("gen_shards.py summary: %w", err)
	}
	h.samples = totals.Samples
	h.objects, err = describeTree(h.data)
	return err
}

// describeTree lists the regular files under dir with size and sha256.
func describeTree(dir string) ([]object, error) {
	var objs []object
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		sum, size, err := fileSHA256(path)
		if err != nil {
			return err
		}
		objs = append(objs, object{key: filepath.ToSlash(rel), size: size, sha256: sum})
		return nil
	})
	sort.Slice(objs, func(i, j int) bool { return objs[i].key < objs[j].key })
	return objs, err
}

func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", n, fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// uploadDataset copies the data set under the prefix, plus two objects the
// mount of the prefix must not show: one beside the prefix whose key starts
// with the same letters, and one elsewhere in the bucket.
func (h *harness) uploadDataset() error {
	if err := h.rclone("mkdir", ":s3:"+h.bucket); err != nil {
		return err
	}
	if err := h.rclone("copy", "--transfers", "4", h.data, ":s3:"+h.bucket+"/"+h.prefix); err != nil {
		return err
	}
	for _, key := range []string{h.prefix + "er/not-in-prefix.bin", "other/outside.bin"} {
		if err := h.putObject(h.bucket, key, []byte("outside the mounted prefix\n")); err != nil {
			return err
		}
	}
	return nil
}

// keys returns the keys of objs in order.
func keys(objs []object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.key
	}
	return out
}

// lookup returns the object with the given key.
func lookup(objs []object, key string) (object, bool) {
	i := sort.Search(len(objs), func(i int) bool { return objs[i].key >= key })
	if i < len(objs) && objs[i].key == key {
		return objs[i], true
	}
	return object{}, false
}

// smallShards returns the top-level regular shards.
func (h *harness) smallShards() []object {
	var out []object
	for _, o := range h.objects {
		if strings.HasPrefix(o.key, "shard-") {
			out = append(out, o)
		}
	}
	return out
}
