//go:build e2e

package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
)

// TestCSIContainerRestart restarts the plugin's container as a container
// runtime does, and checks that the volumes it published keep serving and
// that the plugin started again finds them and can unpublish them.
//
// The container is emulated as closely as this host allows: the plugin
// shares the host's PID namespace (the DaemonSet's hostPID), runs in a
// cgroup of its own in every hierarchy, with a memory limit (the
// container's), in a cgroup namespace of its own rooted there and a mount
// namespace of its own. That namespace sees its own cgroups at
// /sys/fs/cgroup, the host's at another path (the DaemonSet's hostPath),
// and shares the pods directory with the host both ways (Bidirectional
// propagation). The restart kills every process of the container's
// cgroup, as runc does for a container without a PID namespace of its own.
func TestCSIContainerRestart(t *testing.T) {
	t.Parallel()
	const memoryLimit = 3 << 30
	dir := t.TempDir()
	sock, cacheRoot := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "cache")
	pods, hostCgroups := filepath.Join(dir, "pods"), filepath.Join(dir, "host-cgroup")
	sharedMountDir(t, pods)
	if err := os.Mkdir(hostCgroups, 0o755); err != nil {
		t.Fatal(err)
	}
	ctr := newContainerCgroup(t, memoryLimit)

	targetA, targetB := filepath.Join(pods, "a", "mount"), filepath.Join(pods, "b", "mount")
	for _, target := range []string{targetA, targetB} {
		os.MkdirAll(filepath.Dir(target), 0o750)
		t.Cleanup(func() { cleanUpTarget(target) })
	}
	// B mounts another prefix: the data set's nested one.
	var objsB []object
	for _, o := range e2e.objects {
		if key, ok := strings.CutPrefix(o.key, "nested/"); ok {
			objsB = append(objsB, object{key: key, size: o.size, sha256: o.sha256})
		}
	}
	if len(objsB) == 0 {
		t.Fatal("the data set has no object under nested/")
	}
	volA := map[string]string{"source": e2e.source(), "endpoint_url": e2e.minio.url, "cache_size": "1GiB"}
	volB := map[string]string{"source": e2e.source() + "/nested", "endpoint_url": e2e.minio.url, "cache_size": "1GiB"}

	plugin := startContainerPlugin(t, ctr, sock, cacheRoot, hostCgroups)
	for _, v := range []struct {
		id, target string
		vctx       map[string]string
	}{{"vol-a", targetA, volA}, {"vol-b", targetB, volB}} {
		if err := plugin.publish(v.id, v.target, v.vctx, testSecret()); err != nil {
			t.Fatalf("publish %s: %v\n%s", v.id, err, plugin.output.String())
		}
	}
	checkAllObjects(t, "A after publish", targetA)
	checkObjects(t, "B after publish", targetB, objsB)

	// Each daemon runs outside the container's groups, in one of its own
	// with the container's memory limit.
	daemons := map[string]int{}
	var daemonGroups []string
	for _, target := range []string{targetA, targetB} {
		pids := serverPids(target)
		if len(pids) != 1 {
			t.Fatalf("want one daemon serving %s, found %v", target, pids)
		}
		daemons[target] = pids[0]
		groups := cgroupsOf(t, pids[0])
		for _, d := range ctr.dirs {
			if procsHold(d, pids[0]) {
				t.Errorf("daemon %d of %s is in the container's cgroup %s", pids[0], target, d)
			}
		}
		mem, ok := groups["memory"]
		if !ok {
			t.Fatalf("daemon %d: no memory cgroup in /proc/%d/cgroup", pids[0], pids[0])
		}
		daemonGroups = append(daemonGroups, filepath.Join(ctr.memoryMount, mem))
		t.Cleanup(func() {
			for _, h := range ctr.hierarchies {
				g := filepath.Join(h.Mountpoint, mem)
				for _, pid := range cgroupProcs(g) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				if err := removeCgroup(g); err != nil {
					t.Error(err)
				}
			}
		})
		raw, err := os.ReadFile(filepath.Join(ctr.memoryMount, mem, ctr.memoryLimitFile))
		if got, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err != nil || got != memoryLimit {
			t.Errorf("daemon %d of %s: memory cgroup %s limited to %q (%v), want the container's %d", pids[0], target, mem, raw, err, memoryLimit)
		}
	}

	ctr.killAll(t)
	<-plugin.exited
	for target, pid := range daemons {
		if syscall.Kill(pid, 0) != nil {
			t.Errorf("daemon %d of %s died with the plugin's container", pid, target)
		}
	}
	checkAllObjects(t, "A after the plugin's container restarted", targetA)
	checkObjects(t, "B after the plugin's container restarted", targetB, objsB)

	plugin = startContainerPlugin(t, ctr, sock, cacheRoot, hostCgroups)
	for _, target := range []string{targetA, targetB} {
		if want := fmt.Sprintf(`msg="found a volume still mounted" volume=vol-%s target=%s`, filepath.Base(filepath.Dir(target)), target); !strings.Contains(plugin.output.String(), want) {
			t.Errorf("the restarted plugin did not log %q:\n%s", want, plugin.output.String())
		}
	}
	if err := plugin.publish("vol-a", targetA, volA, testSecret()); err != nil {
		t.Errorf("publishing A again after the restart: %v", err)
	}
	plugin.unpublishAll(t, "after the restart", map[string]string{"vol-a": targetA, "vol-b": targetB})
	for _, g := range daemonGroups {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Errorf("daemon cgroup %s left behind after unpublish (stat: %v)", g, err)
		}
	}
}

// sharedMountDir makes dir a mount point of its own, shared: mounts under it
// made in a mount namespace copied from this one show in both, as with a
// Bidirectional volume. The test's cleanup detaches it, after the
// cleanups registered later (those of the mounts under it).
func sharedMountDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--bind", dir, dir}, {"--make-shared", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "--lazy", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
}

// containerCgroup is a cgroup of the same name in every hierarchy, as a
// container runtime makes for a container.
type containerCgroup struct {
	dirs            []string // in each hierarchy
	hierarchies     []*mountinfo.Info
	memoryMount     string // the memory controller's hierarchy
	memoryLimitFile string
}

// newContainerCgroup makes the group, with a memory limit, and removes
// it when the test ends, once its processes are gone.
func newContainerCgroup(t *testing.T, memoryLimit int64) *containerCgroup {
	t.Helper()
	hs, err := mountinfo.GetMounts(func(i *mountinfo.Info) (bool, bool) {
		return i.FSType != "cgroup" && i.FSType != "cgroup2", false
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &containerCgroup{hierarchies: hs}
	name := fmt.Sprintf("shardfs-test-ctr-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	v1Memory := false
	for _, h := range hs {
		v1Memory = v1Memory || (h.FSType == "cgroup" && hasOption(h.VFSOptions, "memory"))
	}
	for _, h := range hs {
		d := filepath.Join(h.Mountpoint, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("this test makes cgroups and needs them writable (root): %v", err)
		}
		c.dirs = append(c.dirs, d)
		if h.FSType == "cgroup" && hasOption(h.VFSOptions, "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				parent, _ := os.ReadFile(filepath.Join(h.Mountpoint, f))
				os.WriteFile(filepath.Join(d, f), parent, 0)
			}
		}
		switch {
		case h.FSType == "cgroup" && hasOption(h.VFSOptions, "memory"):
			c.memoryMount, c.memoryLimitFile = h.Mountpoint, "memory.limit_in_bytes"
		case h.FSType == "cgroup2" && !v1Memory:
			c.memoryMount, c.memoryLimitFile = h.Mountpoint, "memory.max"
			os.WriteFile(filepath.Join(h.Mountpoint, "cgroup.subtree_control"), []byte("+memory"), 0)
		default:
			continue
		}
		if err := os.WriteFile(filepath.Join(d, c.memoryLimitFile), []byte(strconv.FormatInt(memoryLimit, 10)), 0); err != nil {
			t.Fatalf("set the limit of cgroup %s: %v", d, err)
		}
	}
	if c.memoryMount == "" {
		t.Fatal("no memory controller mounted (see /proc/self/mountinfo)")
	}
	t.Cleanup(func() {
		c.killAll(t)
		for _, d := range c.dirs {
			if err := removeCgroup(d); err != nil {
				t.Error(err)
			}
		}
	})
	return c
}

func hasOption(options, o string) bool {
	for _, x := range strings.Split(options, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// killAll kills every process in the group with SIGKILL until none is
// left: a process forked while the kill goes on is killed in the next
// round, and a process killed leaves the group once it has exited.
func (c *containerCgroup) killAll(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(unmountTimeout)
	for {
		left := 0
		for _, d := range c.dirs {
			for _, pid := range cgroupProcs(d) {
				left++
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in the container's cgroups after SIGKILL: %v", c.dirs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cgroupProcs(dir string) []int {
	raw, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func procsHold(dir string, pid int) bool {
	for _, p := range cgroupProcs(dir) {
		if p == pid {
			return true
		}
	}
	return false
}

// removeCgroup removes a cgroup directory; the kernel lets an emptied
// group go a moment after its last process.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || os.IsNotExist(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %v", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupsOf maps each v1 controller of process pid to its group's path
// (and "" to its v2 group's), as /proc/PID/cgroup shows them here.
func cgroupsOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out
}

// startContainerPlugin starts the plugin in the emulated container: a
// shell joins the container's groups, unshare gives it a cgroup namespace
// rooted there and a mount namespace, in which a second shell binds the
// host's hierarchies at hostCgroups, mounts the container's own view of
// them at /sys/fs/cgroup and becomes the plugin, which puts its daemons'
// groups under hostCgroups.
func startContainerPlugin(t *testing.T, c *containerCgroup, sock, cacheRoot, hostCgroups string) *csiPlugin {
	t.Helper()
	var procs []string
	for _, d := range c.dirs {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	view := []string{
		"set -e",
		"mount --make-rprivate /sys/fs/cgroup",
		`mount --rbind /sys/fs/cgroup "$0"`,
		"umount --recursive /sys/fs/cgroup",
	}
	sharedRoot := false
	for _, h := range c.hierarchies {
		sharedRoot = sharedRoot || h.Mountpoint == "/sys/fs/cgroup"
	}
	if !sharedRoot {
		view = append(view, "mount -t tmpfs cgroup-view /sys/fs/cgroup")
	}
	for _, h := range c.hierarchies {
		if h.FSType == "cgroup2" {
			view = append(view, fmt.Sprintf("mkdir -p %s && mount -t cgroup2 cgroup2 %s", h.Mountpoint, h.Mountpoint))
			continue
		}
		var opts []string
		for _, o := range strings.Split(h.VFSOptions, ",") {
			if o != "rw" && o != "ro" {
				opts = append(opts, o)
			}
		}
		view = append(view, fmt.Sprintf("mkdir -p %s && mount -t cgroup -o %s cgroup %s", h.Mountpoint, strings.Join(opts, ","), h.Mountpoint))
	}
	view = append(view, `exec "$@"`)
	join := `procs=$1; view=$2; host=$3; shift 3
for f in $procs; do echo $$ > "$f"; done
exec unshare --cgroup --mount --propagation unchanged sh -c "$view" "$host" "$@"`
	args := append([]string{"-c", join, "sh", strings.Join(procs, " "), strings.Join(view, "\n"), hostCgroups, e2e.bin},
		csiArgs(sock, cacheRoot, "--cgroup-root", hostCgroups)...)
	return runCSIPlugin(t, sock, exec.Command("sh", args...))
}
