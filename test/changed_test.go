//go:build e2e

package test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// pattern returns n reproducible pseudo-random bytes for seed.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readAllKeepGoing reads f to the end in chunks and returns what it read
// and the first error other than EOF.
func readAllKeepGoing(f *os.File, chunk int) ([]byte, error) {
	var out []byte
	buf := make([]byte, chunk)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestObjectOverwrittenAfterMount: an object replaced after the listing
// reads as EIO, never as new bytes, and never as a mix of two versions.
func TestObjectOverwrittenAfterMount(t *testing.T) {
	t.Parallel()
	const bucket = "shardfs-overwrite"
	const size = 24 << 20
	oldA, oldB := pattern(1, 8<<20), pattern(2, size)
	newA, newB := pattern(11, len(oldA)), pattern(12, size)
	if err := e2e.rclone("mkdir", ":s3:"+bucket); err != nil {
		t.Fatal(err)
	}
	for key, content := range map[string][]byte{"a.bin": oldA, "b.bin": oldB} {
		if err := e2e.putObject(bucket, key, content); err != nil {
			t.Fatal(err)
		}
	}
	m := mountShardfs(t, "s3://"+bucket)

	// b.bin: read the start, then the object changes under the open file.
	fb, err := os.Open(m.path("b.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(fb, head); err != nil || !bytes.Equal(head, oldB[:len(head)]) {
		t.Fatalf("first 64 KiB of b.bin before the overwrite: %v, equal=%v", err, bytes.Equal(head, oldB[:len(head)]))
	}

	// a.bin: never read before it changes.
	for key, content := range map[string][]byte{"a.bin": newA, "b.bin": newB} {
		if err := e2e.putObject(bucket, key, content); err != nil {
			t.Fatal(err)
		}
	}

	fa, err := os.Open(m.path("a.bin"))
	if err != nil {
		t.Fatalf("open a.bin after the overwrite: %v", err)
	}
	got, err := readAllKeepGoing(fa, 1<<20)
	fa.Close()
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read a.bin after the overwrite: %d bytes, err %v; want EIO", len(got), err)
	}
	if !bytes.Equal(got, oldA[:len(got)]) {
		t.Errorf("a.bin: the %d bytes read before the error are not the listed version", len(got))
	}

	// Whatever of b.bin still reads must be the old version; an error must be EIO.
	rest, err := readAllKeepGoing(fb, 256<<10)
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Errorf("read b.bin after the overwrite: %v, want EIO or the old bytes", err)
	}
	if old := oldB[len(head):]; !bytes.Equal(rest, old[:min(len(rest), len(old))]) {
		at := len(head) + firstDiff(rest, old)
		t.Errorf("b.bin: bytes of the new version served at offset %d (read %d bytes after the overwrite)", at, len(rest))
	}
	if err == nil && len(head)+len(rest) != size {
		t.Errorf("b.bin: read %d bytes without error, want %d", len(head)+len(rest), size)
	}

	// A new mount lists the new version and serves it.
	fresh := mountShardfs(t, "s3://"+bucket)
	for key, content := range map[string][]byte{"a.bin": newA, "b.bin": newB} {
		got, err := os.ReadFile(filepath.Join(fresh.dir, key))
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("%s through a mount made after the overwrite: err %v, new content=%v", key, err, bytes.Equal(got, content))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestLocalFileReplacedAfterMount: the same rule for a directory SOURCE.
func TestLocalFileReplacedAfterMount(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	old := pattern(3, 4<<20)
	if err := os.WriteFile(filepath.Join(src, "c.bin"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	m := mountShardfs(t, src)
	// Replace the file (new inode), as a dataset rewrite would.
	tmp := filepath.Join(src, ".c.bin.tmp")
	if err := os.WriteFile(tmp, pattern(13, len(old)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(src, "c.bin")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(m.path("c.bin"))
	if err != nil {
		t.Fatalf("open c.bin after the replacement: %v", err)
	}
	defer f.Close()
	got, err := readAllKeepGoing(f, 1<<20)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read c.bin after the replacement: %d bytes, err %v; want EIO", len(got), err)
	}
	if !bytes.Equal(got, old[:len(got)]) {
		t.Errorf("c.bin: the %d bytes read are not the listed version", len(got))
	}
}
