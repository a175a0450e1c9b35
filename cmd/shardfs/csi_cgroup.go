package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shardfs/shardfs/cgroup"
)

// A container restart kills every process in the container's cgroup, and
// the kubelet kills what is left in the pod's when the pod goes (an
// upgrade). So the CSI plugin starts each volume's daemon in a cgroup of
// its own, shardfs-csi/HASH of the target, in every hierarchy mounted
// under its --cgroup-root (the host's cgroup file system), with the
// plugin's own memory limit. The `shardfs mount` the plugin runs joins
// that group before anything else happens (joinDaemonCgroup), so the
// daemon it starts is in it from its first instruction and sizes its
// budgets to the group's limit.

// daemonCgroupEnv carries the group's directories, one a line, to the
// `shardfs mount` the plugin runs.
const daemonCgroupEnv = "SHARDFS_CSI_CGROUPS"

// daemonCgroupParent holds the daemons' groups in each hierarchy.
const daemonCgroupParent = "shardfs-csi"

// daemonCgroupGone bounds how long removing a daemon's group waits for
// the kernel to let go of a daemon that has exited.
const daemonCgroupGone = 10 * time.Second

func init() { joinDaemonCgroup() }

// joinDaemonCgroup moves this process into the groups daemonCgroupEnv
// names, if it names any, and takes the variable out of the environment
// its children get. A group it cannot join ends the process with one line:
// a daemon outside it would die with the plugin's container.
func joinDaemonCgroup() {
	dirs, ok := os.LookupEnv(daemonCgroupEnv)
	if !ok {
		return
	}
	os.Unsetenv(daemonCgroupEnv)
	if err := cgroup.Join(strings.Split(dirs, "\n")); err != nil {
		fmt.Fprintf(os.Stderr, "shardfs: %v\n", err)
		os.Exit(1)
	}
}

// daemonGroups makes, names and removes the daemons' groups.
type daemonGroups struct {
	hierarchies []cgroup.Hierarchy
	memoryLimit int64 // each daemon's group's; 0 for none
}

// newDaemonGroups finds the hierarchies under root and the plugin's own
// memory limit.
func newDaemonGroups(root string) (*daemonGroups, error) {
	hs, err := cgroup.Hierarchies(root)
	if err != nil {
		return nil, fmt.Errorf("--cgroup-root %s: %w", root, err)
	}
	limit, err := cgroup.MemoryLimit()
	if err != nil {
		return nil, fmt.Errorf("reading the plugin's memory limit: %w", err)
	}
	return &daemonGroups{hierarchies: hs, memoryLimit: limit.Bytes}, nil
}

func (d *daemonGroups) rel(target string) string {
	sum := sha256.Sum256([]byte(target))
	return daemonCgroupParent + "/" + hex.EncodeToString(sum[:8])
}

// make makes target's group and returns the environment variable that
// makes a `shardfs mount` join it.
func (d *daemonGroups) make(target string) (string, error) {
	g, err := cgroup.Make(d.hierarchies, d.rel(target), d.memoryLimit)
	if err != nil {
		return "", err
	}
	return daemonCgroupEnv + "=" + strings.Join(g.Dirs, "\n"), nil
}

// remove removes target's group once its daemon is gone.
func (d *daemonGroups) remove(target string) error {
	var g cgroup.Group
	for _, h := range d.hierarchies {
		g.Dirs = append(g.Dirs, filepath.Join(h.Dir, d.rel(target)))
	}
	return g.Remove(daemonCgroupGone)
}
