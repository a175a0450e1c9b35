package test

import (
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// TestFileDirectoryCollision: when keys "a" and "a/b" both exist, the
// directory wins and the file "a" is hidden (README: key collisions).
func TestFileDirectoryCollision(t *testing.T) {
	const bucket = "shardfs-collision"
	if err := e2e.rclone("mkdir", ":s3:"+bucket); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "a/b", "a/c/d", "z", "y/x", "y"} {
		if err := e2e.putObject(bucket, key, []byte("object "+key+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	m := mountShardfs(t, "s3://"+bucket)
	out, err := exec.Command("find", m.dir, "-type", "f").Output()
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var got []string
	for _, p := range strings.Fields(string(out)) {
		got = append(got, strings.TrimPrefix(p, m.dir+"/"))
	}
	sort.Strings(got)
	assertSameList(t, "find -type f", got, []string{"a/b", "a/c/d", "y/x", "z"})
	for _, dir := range []string{"a", "y"} {
		if st, err := os.Stat(m.path(dir)); err != nil || !st.IsDir() {
			t.Errorf("%s: want a directory (err %v)", dir, err)
		}
	}
	if got, err := os.ReadFile(m.path("a/b")); err != nil || string(got) != "object a/b\n" {
		t.Errorf("a/b: %q, %v", got, err)
	}
}
