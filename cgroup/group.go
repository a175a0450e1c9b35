package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	Dir string // its mount point
	V2  bool   // the unified hierarchy; else a v1 one
	// Options are a v1 hierarchy's mount options: the controllers bound
	// to it ("cpuset", "memory") or its name ("name=systemd").
	Options []string
}

func (h Hierarchy) has(controller string) bool { return slices.Contains(h.Options, controller) }

// Hierarchies lists the cgroup hierarchies mounted at or under dir in the
// calling process's mount table, each once.
func Hierarchies(dir string) ([]Hierarchy, error) {
	dir = filepath.Clean(dir)
	infos, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		inside := i.Mountpoint == dir || strings.HasPrefix(i.Mountpoint, dir+"/")
		return !inside || (i.FSType != "cgroup" && i.FSType != "cgroup2"), false
	})
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	var hs []Hierarchy
	seen := map[string]bool{}
	for _, i := range infos {
		if seen[i.Mountpoint] {
			continue
		}
		seen[i.Mountpoint] = true
		h := Hierarchy{Dir: i.Mountpoint, V2: i.FSType == "cgroup2"}
		if !h.V2 {
			for _, o := range strings.Split(i.VFSOptions, ",") {
				if o != "rw" && o != "ro" {
					h.Options = append(h.Options, o)
				}
			}
		}
		hs = append(hs, h)
	}
	if len(hs) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy is mounted under %s", dir)
	}
	return hs, nil
}

// Group is a cgroup made in several hierarchies: the same relative path
// in each.
type Group struct {
	Dirs []string // the group's directory in each hierarchy
}

// Make makes the group rel ("a/b") in every hierarchy of hs, with the
// groups above it, and reuses what is already there. A v1 cpuset group
// gets its parent's CPUs and memory nodes, without which no process may
// join it. Where memoryLimit is over zero it is the group's memory limit:
// memory.limit_in_bytes in the v1 memory hierarchy, else memory.max in
// the unified one, whose groups above then enable the memory controller
// for their children.
func Make(hs []Hierarchy, rel string, memoryLimit int64) (Group, error) {
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == "." || strings.HasPrefix(rel, "..") {
		return Group{}, fmt.Errorf("cgroup path %q: must be relative and below the hierarchy's root", rel)
	}
	v1Memory := slices.ContainsFunc(hs, func(h Hierarchy) bool { return !h.V2 && h.has("memory") })
	var g Group
	for _, h := range hs {
		dir := h.Dir
		for _, part := range strings.Split(rel, "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if h.V2 && memoryLimit > 0 && !v1Memory {
				// Written before the child exists; enabling what is
				// already enabled is no error.
				if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
					return g, fmt.Errorf("enabling the memory controller in %s: %w", parent, err)
				}
			}
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return g, fmt.Errorf("making cgroup %s: %w", dir, err)
			}
			if !h.V2 && h.has("cpuset") {
				if err := inheritCpuset(parent, dir); err != nil {
					return g, err
				}
			}
		}
		g.Dirs = append(g.Dirs, dir)
		var limitFile string
		switch {
		case memoryLimit <= 0:
		case !h.V2 && h.has("memory"):
			limitFile = "memory.limit_in_bytes"
		case h.V2 && !v1Memory:
			limitFile = "memory.max"
		}
		if limitFile != "" {
			if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(memoryLimit, 10)), 0); err != nil {
				return g, fmt.Errorf("setting the memory limit of cgroup %s: %w", dir, err)
			}
		}
	}
	return g, nil
}

// inheritCpuset fills a v1 cpuset group's empty CPU and memory node lists
// from its parent's.
func inheritCpuset(parent, dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		own, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("cpuset of cgroup %s: %w", dir, err)
		}
		if strings.TrimSpace(string(own)) != "" {
			continue
		}
		from, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return fmt.Errorf("cpuset of cgroup %s: %w", parent, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), from, 0); err != nil {
			return fmt.Errorf("cpuset of cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// Join moves the calling process, every thread of it, into each group
// directory in dirs.
func Join(dirs []string) error {
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// removeEvery is how often Remove tries again while the kernel still
// counts a process that has exited (until its parent reaps it).
const removeEvery = 20 * time.Millisecond

// Remove removes the group's directories, not the groups above them. A
// directory still busy is tried again until wait has passed; one already
// gone is no error.
func (g Group) Remove(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for _, dir := range g.Dirs {
		for {
			err := syscall.Rmdir(dir)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("removing cgroup %s: %w", dir, err)
			}
			time.Sleep(removeEvery)
		}
	}
	return nil
}
