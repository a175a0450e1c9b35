// Package cgroup reads the memory limit the kernel enforces on the calling
// process: memory.max of its cgroup v2 group, or memory.limit_in_bytes of
// its cgroup v1 memory controller group, the smallest of the group and its
// ancestors up to the cgroup mount, found through /proc/self/cgroup and
// /proc/self/mountinfo. It also makes a group of the same path in every
// mounted hierarchy (Make), moves the calling process into one (Join) and
// removes one (Group.Remove), so that a process can be placed outside the
// groups it was started in.
//
// It never moves a process other than the caller, never kills one, and
// never decides what a limit means for the daemon's budgets: cmd/shardfs
// sizes those from the Limit it returns, and chooses where groups go.
package cgroup
