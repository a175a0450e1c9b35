package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// host writes files under a fresh directory laid out like a host's root:
// paths relative to it, contents as given.
func host(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	v1Groups = "9:name=systemd:/\n4:memory:/pods/p1\n1:cpu,cpuacct:/pods/p1\n0::/\n"
	v1Mounts = "30 22 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n" +
		"35 30 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n" +
		"36 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	v2Groups = "0::/kubepods/pod1/c1\n"
	v2Mounts = "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	noLimit  = "9223372036854771712\n"
)

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Limit
	}{
		{"v1 limit of the own group", map[string]string{
			"proc/self/cgroup": v1Groups, "proc/self/mountinfo": v1Mounts,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":         noLimit,
			"sys/fs/cgroup/memory/pods/memory.limit_in_bytes":    noLimit,
			"sys/fs/cgroup/memory/pods/p1/memory.limit_in_bytes": "805306368\n",
			"sys/fs/cgroup/unified/pods/p1/memory.max":           "1024\n", // hybrid: v2 binds no memory controller
		}, Limit{805306368, "/sys/fs/cgroup/memory/pods/p1"}},
		{"v1 no limit is the huge value", map[string]string{
			"proc/self/cgroup": v1Groups, "proc/self/mountinfo": v1Mounts,
			"sys/fs/cgroup/memory/pods/p1/memory.limit_in_bytes": noLimit,
		}, Limit{}},
		{"v1 parent's smaller limit", map[string]string{
			"proc/self/cgroup": v1Groups, "proc/self/mountinfo": v1Mounts,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":         noLimit,
			"sys/fs/cgroup/memory/pods/memory.limit_in_bytes":    "536870912\n",
			"sys/fs/cgroup/memory/pods/p1/memory.limit_in_bytes": "805306368\n",
		}, Limit{536870912, "/sys/fs/cgroup/memory/pods"}},
		{"v1 container: mount root is the own group", map[string]string{
			"proc/self/cgroup":                           "4:memory:/kubepods/pod1/c1\n",
			"proc/self/mountinfo":                        "35 30 0:32 /kubepods/pod1/c1 /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
		}, Limit{1073741824, "/sys/fs/cgroup/memory"}},
		{"v2 limit of the own group", map[string]string{
			"proc/self/cgroup": v2Groups, "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/kubepods/memory.max":         "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "max\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "1073741824\n",
		}, Limit{1073741824, "/sys/fs/cgroup/kubepods/pod1/c1"}},
		{"v2 max everywhere", map[string]string{
			"proc/self/cgroup": v2Groups, "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
		}, Limit{}},
		{"v2 pod limit above the container's max", map[string]string{
			"proc/self/cgroup": v2Groups, "proc/self/mountinfo": v2Mounts,
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "2147483648\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
		}, Limit{2147483648, "/sys/fs/cgroup/kubepods/pod1"}},
		{"v2 namespace: own group is the mount's root", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"proc/self/mountinfo":      "25 1 0:22 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/memory.max": "805306368\n",
		}, Limit{805306368, "/sys/fs/cgroup"}},
		{"v2 mount point with a space", map[string]string{
			"proc/self/cgroup":     "0::/a\n",
			"proc/self/mountinfo":  `25 1 0:22 / /cg\040root rw - cgroup2 none rw` + "\n",
			"cg root/a/memory.max": "4096\n",
		}, Limit{4096, "/cg root/a"}},
		{"v2 daemon the CSI plugin placed outside its container's namespace", map[string]string{
			"proc/self/cgroup": "0::/../../shardfs-csi/v\n",
			"proc/self/mountinfo": "25 1 0:22 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n" +
				"40 1 0:22 /../.. /host/sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/memory.max":                    "max\n",
			"host/sys/fs/cgroup/shardfs-csi/v/memory.max": "1073741824\n",
		}, Limit{1073741824, "/host/sys/fs/cgroup/shardfs-csi/v"}},
		{"no cgroups", map[string]string{}, Limit{}},
		{"no memory hierarchy mounted", map[string]string{
			"proc/self/cgroup": v1Groups, "proc/self/mountinfo": "30 22 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n",
		}, Limit{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := MemoryLimitAt(host(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("limit %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMemoryLimitMalformed(t *testing.T) {
	t.Parallel()
	for _, files := range []map[string]string{
		{"proc/self/cgroup": "garbage\n", "proc/self/mountinfo": v2Mounts},
		{"proc/self/cgroup": v2Groups, "proc/self/mountinfo": "25 1 0:22 / /sys/fs/cgroup rw\n"},
		{"proc/self/cgroup": v2Groups, "proc/self/mountinfo": v2Mounts, "sys/fs/cgroup/kubepods/pod1/c1/memory.max": "lots\n"},
	} {
		if got, err := MemoryLimitAt(host(t, files)); err == nil {
			t.Errorf("%v: limit %+v, want an error", files, got)
		}
	}
}

// On this machine the reading must at least not fail.
func TestMemoryLimitOfThisProcess(t *testing.T) {
	t.Parallel()
	if _, err := MemoryLimit(); err != nil {
		t.Fatal(err)
	}
}

// hierarchies lays out a v1 memory and cpuset hierarchy and the unified
// one as plain directories, as Make finds them after the kernel made the
// groups' files: a new cpuset group's lists start empty.
func hierarchies(t *testing.T) (string, []Hierarchy) {
	t.Helper()
	root := host(t, map[string]string{
		"memory/memory.limit_in_bytes":   noLimit,
		"cpuset/cpuset.cpus":             "0-3\n",
		"cpuset/cpuset.mems":             "0\n",
		"unified/cgroup.subtree_control": "",
	})
	return root, []Hierarchy{
		{Dir: filepath.Join(root, "memory"), Options: []string{"memory"}},
		{Dir: filepath.Join(root, "cpuset"), Options: []string{"cpuset"}},
		{Dir: filepath.Join(root, "unified"), V2: true},
	}
}

func TestMakeSetsTheLimitAndTheCpuset(t *testing.T) {
	t.Parallel()
	root, hs := hierarchies(t)
	// The kernel makes these files with a group; plain directories do not.
	for _, f := range []string{"cpuset/csi/cpuset.cpus", "cpuset/csi/cpuset.mems", "cpuset/csi/v/cpuset.cpus", "cpuset/csi/v/cpuset.mems"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(root, f), nil, 0o644)
	}
	g, err := Make(hs, "csi/v", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "memory/csi/v"), filepath.Join(root, "cpuset/csi/v"), filepath.Join(root, "unified/csi/v")}
	if !slices.Equal(g.Dirs, want) {
		t.Fatalf("group dirs %v, want %v", g.Dirs, want)
	}
	for file, want := range map[string]string{
		"memory/csi/v/memory.limit_in_bytes": "1073741824",
		"cpuset/csi/v/cpuset.cpus":           "0-3\n",
		"cpuset/csi/v/cpuset.mems":           "0\n",
	} {
		if got, err := os.ReadFile(filepath.Join(root, file)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
	}
	// With the v1 memory controller, the unified hierarchy limits nothing.
	if _, err := os.Stat(filepath.Join(root, "unified/csi/v/memory.max")); err == nil {
		t.Errorf("memory.max written in the unified hierarchy of a v1 memory host")
	}
	if _, err := Make(hs, "csi/v", 1<<30); err != nil {
		t.Errorf("making the same group again: %v", err)
	}
}

func TestMakeOnV2EnablesMemoryAbove(t *testing.T) {
	t.Parallel()
	root := host(t, map[string]string{"cgroup.subtree_control": ""})
	g, err := Make([]Hierarchy{{Dir: root, V2: true}}, "csi/v", 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"cgroup.subtree_control":     "+memory",
		"csi/cgroup.subtree_control": "+memory",
		"csi/v/memory.max":           "268435456",
	} {
		if got, err := os.ReadFile(filepath.Join(root, file)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
	}
	if len(g.Dirs) != 1 || g.Dirs[0] != filepath.Join(root, "csi/v") {
		t.Errorf("group dirs %v", g.Dirs)
	}
}

func TestMakeRefusesAPathOutsideTheHierarchy(t *testing.T) {
	t.Parallel()
	_, hs := hierarchies(t)
	for _, rel := range []string{"../x", "/abs", ".", ""} {
		if _, err := Make(hs, rel, 0); err == nil || !strings.Contains(err.Error(), "must be relative") {
			t.Errorf("Make(%q): %v, want a refusal", rel, err)
		}
	}
}
