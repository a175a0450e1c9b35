package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Limit is a memory limit of a cgroup.
type Limit struct {
	Bytes int64  // the limit; 0 when no group up to the mount sets one
	Dir   string // the group's directory as the process sees it, e.g. /sys/fs/cgroup/memory/x; "" without a limit
}

// unlimitedV1 and above is v1's "no limit": the kernel reports its largest
// page count times the page size (9223372036854771712 with 4 KiB pages),
// which no real limit comes near.
const unlimitedV1 = 1 << 62

// MemoryLimit is the memory limit of the calling process's cgroup. A
// process in no memory cgroup, or in groups without a limit, gets a zero
// Limit and no error.
func MemoryLimit() (Limit, error) { return MemoryLimitAt("/") }

// MemoryLimitAt is MemoryLimit with every file read under root instead of
// "/": root/proc/self/cgroup, root/proc/self/mountinfo and the cgroup files
// under root plus the mount points mountinfo names. Limit.Dir leaves root
// out. Tests pass a directory laid out like a host.
//
// The v1 memory controller wins where both versions are mounted: a hybrid
// host binds memory to v1, and its v2 hierarchy then limits nothing.
func MemoryLimitAt(root string) (Limit, error) {
	groups, err := readGroups(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Limit{}, nil // no cgroups at all (not Linux, or no /proc)
		}
		return Limit{}, err
	}
	mounts, err := readMounts(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return Limit{}, err
	}
	if p, ok := groups.v1Memory(); ok {
		if m, ok := mounts.find(p, isV1Memory); ok {
			return smallestLimit(root, m, p, "memory.limit_in_bytes")
		}
	}
	if p, ok := groups.v2(); ok {
		if m, ok := mounts.find(p, isV2); ok {
			return smallestLimit(root, m, p, "memory.max")
		}
	}
	return Limit{}, nil
}

// group is one line of /proc/self/cgroup: hierarchy-ID:controllers:path.
type group struct {
	id, controllers, path string
}

type groups []group

func readGroups(name string) (groups, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var gs groups
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: malformed line %q", name, line)
		}
		gs = append(gs, group{id: f[0], controllers: f[1], path: f[2]})
	}
	return gs, nil
}

// v1Memory is the path of the v1 hierarchy the memory controller is bound to.
func (gs groups) v1Memory() (string, bool) {
	for _, g := range gs {
		for _, c := range strings.Split(g.controllers, ",") {
			if c == "memory" {
				return g.path, true
			}
		}
	}
	return "", false
}

// v2 is the path in the unified hierarchy ("0::PATH").
func (gs groups) v2() (string, bool) {
	for _, g := range gs {
		if g.id == "0" && g.controllers == "" {
			return g.path, true
		}
	}
	return "", false
}

// mount is the part of a mountinfo line that places a cgroup hierarchy.
type mount struct {
	root, point, fstype, superOptions string
}

type mounts []mount

// readMounts reads the mount table at name (a /proc/PID/mountinfo),
// parsed by moby/sys/mountinfo, which also undoes the kernel's octal
// escapes in paths.
func readMounts(name string) (mounts, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	infos, err := mountinfo.GetMountsFromReader(f, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ms := make(mounts, 0, len(infos))
	for _, i := range infos {
		ms = append(ms, mount{root: i.Root, point: i.Mountpoint, fstype: i.FSType, superOptions: i.VFSOptions})
	}
	return ms, nil
}

func isV1Memory(m mount) bool {
	if m.fstype != "cgroup" {
		return false
	}
	for _, o := range strings.Split(m.superOptions, ",") {
		if o == "memory" {
			return true
		}
	}
	return false
}

func isV2(m mount) bool { return m.fstype == "cgroup2" }

// find is the mount of the hierarchy (is) that shows group p: the one whose
// root holds p, the deepest such root where bind mounts show parts of it.
// Without one (a cgroup namespace whose paths mountinfo does not share), a
// mount of the hierarchy's root stands for the process's own group, as it
// does inside a container.
func (ms mounts) find(p string, is func(mount) bool) (mount, bool) {
	var best mount
	found := false
	for _, m := range ms {
		if !is(m) || !under(p, m.root) {
			continue
		}
		if !found || len(m.root) > len(best.root) {
			best, found = m, true
		}
	}
	if found {
		return best, true
	}
	for _, m := range ms {
		if is(m) {
			return mount{root: p, point: m.point, fstype: m.fstype, superOptions: m.superOptions}, true
		}
	}
	return mount{}, false
}

// under reports whether cgroup path p is root or below it.
func under(p, root string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// smallestLimit reads file in group p's directory and in each directory
// above it up to the mount point, and returns the smallest limit: a
// group's usage counts against every ancestor's limit too. A directory
// without the file (v2's root group; a group whose parent does not enable
// the memory controller) sets no limit.
func smallestLimit(root string, m mount, p, file string) (Limit, error) {
	rel := strings.TrimPrefix(path.Clean(p), path.Clean(m.root))
	dir := path.Join(m.point, rel)
	var best Limit
	for {
		n, err := readLimit(filepath.Join(root, dir, file))
		if err != nil {
			return Limit{}, err
		}
		if n > 0 && (best.Bytes == 0 || n < best.Bytes) {
			best = Limit{Bytes: n, Dir: dir}
		}
		if dir == path.Clean(m.point) || dir == "/" || dir == "." {
			return best, nil
		}
		dir = path.Dir(dir)
	}
}

// readLimit reads a v1 or v2 limit file; 0 is no limit.
func readLimit(name string) (int64, error) {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a memory limit", name, s)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return n, nil
}
