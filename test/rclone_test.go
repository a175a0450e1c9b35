//go:build e2e

package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// rclone runs rclone against the test MinIO through an on-the-fly ":s3:"
// remote: a real S3 client, independent of the code under test.
func (h *harness) rclone(args ...string) error {
	_, err := h.rcloneOutput(nil, args...)
	return err
}

func (h *harness) rcloneOutput(stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("rclone", args...)
	var env []string
	for _, kv := range os.Environ() {
		// rclone's S3 client refuses AWS_CA_BUNDLE; the endpoint is plain http.
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"RCLONE_CONFIG=/dev/null",
		"RCLONE_S3_PROVIDER=Minio",
		"RCLONE_S3_ENDPOINT="+h.minio.url,
		"RCLONE_S3_ACCESS_KEY_ID="+accessKey,
		"RCLONE_S3_SECRET_ACCESS_KEY="+secretKey,
		"RCLONE_S3_REGION="+region,
	)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("rclone %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// putObject writes one object with the given content, replacing any.
func (h *harness) putObject(bucket, key string, content []byte) error {
	dir, err := os.MkdirTemp(h.tmp, "put-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "object")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return err
	}
	return h.rclone("copyto", "--ignore-times", path, ":s3:"+bucket+"/"+key)
}

// listing is one object as rclone lists it.
type listing struct {
	Path    string
	Size    int64
	ModTime string
}

// listBucket lists every object of bucket, sorted by key.
func (h *harness) listBucket(bucket string) ([]listing, error) {
	out, err := h.rcloneOutput(nil, "lsjson", "-R", "--files-only", ":s3:"+bucket)
	if err != nil {
		return nil, err
	}
	var items []listing
	if err := json.Unmarshal(out, &items); err != nil {
		return nil, fmt.Errorf("rclone lsjson: %w", err)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Path < items[j].Path })
	return items, nil
}
