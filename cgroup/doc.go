// Package cgroup reads the memory limit the kernel enforces on the calling
// process: memory.max of its cgroup v2 group, or memory.limit_in_bytes of
// its cgroup v1 memory controller group, the smallest of the group and its
// ancestors up to the cgroup mount, found through /proc/self/cgroup and
// /proc/self/mountinfo.
//
// It only reads. It never creates, writes or joins a cgroup, and never
// decides what a limit means for the daemon's budgets: cmd/shardfs sizes
// those from the Limit it returns.
package cgroup
