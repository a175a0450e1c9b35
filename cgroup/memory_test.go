package cgroup

import (
	"os"
	"path/filepath"
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
