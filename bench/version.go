package bench

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// unknownTree is the tree of a binary that names no revision: built
// without VCS stamping, or not answering --version.
const unknownTree = "unknown"

// versionRevision is the revision in `shardfs --version`'s line, "shardfs
// VERSION (REVISION[, modified]) GO"; trees before the modified flag print
// the revision alone.
var versionRevision = regexp.MustCompile(`\(([0-9a-f]{7,40})(, modified)?\)`)

// ParseVersion reads the tree a shardfs binary was built from out of what
// its --version printed: the revision, with "-dirty" (git describe's
// notation) when the tree had uncommitted changes; "" when the line names
// no revision.
func ParseVersion(out string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(line, "shardfs ") {
		return ""
	}
	m := versionRevision.FindStringSubmatch(line)
	switch {
	case m == nil:
		return ""
	case m[2] != "":
		return m[1] + "-dirty"
	}
	return m[1]
}

// binaryTree asks the shardfs binary at path which tree it was built
// from; unknownTree when it cannot say.
func binaryTree(ctx context.Context, path string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return unknownTree
	}
	if tree := ParseVersion(string(out)); tree != "" {
		return tree
	}
	return unknownTree
}
