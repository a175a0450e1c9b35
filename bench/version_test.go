package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestParseVersionReadsTheRevisionAndAModifiedTree(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{"shardfs (devel) (9bc6307a1b2c) go1.26.8\n", "9bc6307a1b2c"},
		{"shardfs (devel) (9bc6307a1b2c, modified) go1.26.8\n", "9bc6307a1b2c-dirty"},
		// A module build: the pseudo-version's revision is not the one read.
		{"shardfs v0.0.0-20260212201848-7aac2a2c5b7c+dirty (7aac2a2c5b7c, modified) go1.26.8", "7aac2a2c5b7c-dirty"},
		{"shardfs v1.2.0 (0123456789ab) go1.25.1", "0123456789ab"},
		// Built without VCS stamping: no revision to name.
		{"shardfs (devel) go1.26.8\n", ""},
		{"shardfs unknown\n", ""},
		{"rclone v1.66.0 (0123456789ab)\n", ""},
		{"", ""},
	} {
		if got := ParseVersion(c.out); got != c.want {
			t.Errorf("ParseVersion(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}

// The driver asks the binary itself, and a binary that cannot answer
// has an unknown tree.
func TestBinaryTreeAsksTheBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "shardfs")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n[ \"$1\" = --version ] && echo 'shardfs (devel) (0123456789ab, modified) go1.26.8'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := binaryTree(context.Background(), bin); got != "0123456789ab-dirty" {
		t.Errorf("tree %q, want 0123456789ab-dirty", got)
	}
	if got := binaryTree(context.Background(), filepath.Join(dir, "missing")); got != unknownTree {
		t.Errorf("a missing binary's tree: %q, want %s", got, unknownTree)
	}
}
