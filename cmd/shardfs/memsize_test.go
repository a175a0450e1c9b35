package main

import (
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cgroup"
)

const (
	miB = int64(1) << 20
	giB = int64(1) << 30
)

func TestSizeMemory(t *testing.T) {
	t.Parallel()
	cg := func(n int64) cgroup.Limit { return cgroup.Limit{Bytes: n, Dir: "/sys/fs/cgroup/memory/x"} }
	defaults := memoryAsk{Prefetch: giB, RAM: giB, PartSize: 8 * miB}
	with := func(f func(*memoryAsk)) memoryAsk { a := defaults; f(&a); return a }
	for _, tc := range []struct {
		name          string
		ask           memoryAsk
		prefetch, ram int64
		err           string // the whole line when not ""
	}{
		{"no cap: the defaults", defaults, giB, giB, ""},
		{"no cap: budgets set are kept", with(func(a *memoryAsk) { a.Prefetch, a.PrefetchSet, a.RAM, a.RAMSet = 8*giB, true, 4*giB, true }), 8 * giB, 4 * giB, ""},
		{"768 MiB limit: 576 MiB target split evenly", with(func(a *memoryAsk) { a.Limit = cg(768 * miB) }), 224 * miB, 224 * miB, ""},
		{"2 GiB limit", with(func(a *memoryAsk) { a.Limit = cg(2 * giB) }), 704 * miB, 704 * miB, ""},
		{"4 GiB limit: the defaults fit", with(func(a *memoryAsk) { a.Limit = cg(4 * giB) }), giB, giB, ""},
		{"256 MiB limit: the smallest of each", with(func(a *memoryAsk) { a.Limit = cg(256 * miB) }), 32 * miB, 32 * miB, ""},
		{"200 MiB limit: read-ahead only", with(func(a *memoryAsk) { a.Limit = cg(200 * miB) }), 32 * miB, 0, ""},
		{"128 MiB limit: too small", with(func(a *memoryAsk) { a.Limit = cg(128 * miB) }), 0, 0,
			"the 128 MiB memory limit of cgroup /sys/fs/cgroup/memory/x is too small: the smallest read-ahead budget (32 MiB) and the daemon's 128 MiB of room need 160 MiB"},
		{"large parts raise the smallest read-ahead", with(func(a *memoryAsk) { a.Limit, a.PartSize = cg(512*miB), 64*miB }), 256 * miB, 0, ""},
		{"both set over the limit", with(func(a *memoryAsk) { a.Limit, a.PrefetchSet, a.RAMSet = cg(768*miB), true, true }), 0, 0,
			"--prefetch-memory 1.0 GiB and --memory-cache-size 1.0 GiB need 2.1 GiB, over the 768 MiB memory limit of cgroup /sys/fs/cgroup/memory/x"},
		{"both set under the limit, over its target", with(func(a *memoryAsk) {
			a.Limit, a.Prefetch, a.PrefetchSet, a.RAM, a.RAMSet = cg(768*miB), 256*miB, true, 256*miB, true
		}), 256 * miB, 256 * miB, ""},
		{"read-ahead set: the RAM tier gets the rest", with(func(a *memoryAsk) { a.Limit, a.Prefetch, a.PrefetchSet = cg(giB), 256*miB, true }), 256 * miB, 384 * miB, ""},
		{"read-ahead set: no rest, no RAM tier", with(func(a *memoryAsk) { a.Limit, a.Prefetch, a.PrefetchSet = cg(768*miB), 512*miB, true }), 512 * miB, 0, ""},
		{"read-ahead set over the limit", with(func(a *memoryAsk) { a.Limit, a.Prefetch, a.PrefetchSet = cg(768*miB), 700*miB, true }), 0, 0,
			"--prefetch-memory 700 MiB needs 828 MiB, over the 768 MiB memory limit of cgroup /sys/fs/cgroup/memory/x"},
		{"RAM tier set: read-ahead gets the rest", with(func(a *memoryAsk) { a.Limit, a.RAM, a.RAMSet = cg(768*miB), 0, true }), 448 * miB, 0, ""},
		{"RAM tier set: read-ahead at its smallest", with(func(a *memoryAsk) { a.Limit, a.RAM, a.RAMSet = cg(768*miB), 600*miB, true }), 32 * miB, 600 * miB, ""},
		{"RAM tier set over the limit", with(func(a *memoryAsk) { a.Limit, a.RAM, a.RAMSet = cg(768*miB), 700*miB, true }), 0, 0,
			"--memory-cache-size 700 MiB needs 860 MiB with the smallest read-ahead budget (32 MiB), over the 768 MiB memory limit of cgroup /sys/fs/cgroup/memory/x"},
		{"target without a limit", with(func(a *memoryAsk) { a.Target = giB }), 448 * miB, 448 * miB, ""},
		{"target under the limit wins", with(func(a *memoryAsk) { a.Target, a.Limit = 512*miB, cg(768*miB) }), 192 * miB, 192 * miB, ""},
		{"target equal to the limit", with(func(a *memoryAsk) { a.Target, a.Limit = 768*miB, cg(768*miB) }), 320 * miB, 320 * miB, ""},
		{"large target: never above the defaults", with(func(a *memoryAsk) { a.Target = 64 * giB }), giB, giB, ""},
		{"target over the limit", with(func(a *memoryAsk) { a.Target, a.Limit = giB, cg(768*miB) }), 0, 0,
			"--memory-target 1.0 GiB is over the 768 MiB memory limit of cgroup /sys/fs/cgroup/memory/x"},
		{"budgets set over the target", with(func(a *memoryAsk) {
			a.Target, a.Prefetch, a.PrefetchSet, a.RAM, a.RAMSet = 512*miB, 256*miB, true, 256*miB, true
		}), 0, 0, "--prefetch-memory 256 MiB and --memory-cache-size 256 MiB need 640 MiB, over --memory-target 512 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, r, err := sizeMemory(tc.ask)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.prefetch || r != tc.ram {
				t.Fatalf("read-ahead %s, RAM tier %s; want %s, %s", formatSize(p), formatSize(r), formatSize(tc.prefetch), formatSize(tc.ram))
			}
			if c := max(tc.ask.Target, tc.ask.Limit.Bytes); c > 0 && p+r+memoryRoom > c {
				t.Fatalf("read-ahead %s and RAM tier %s and room exceed the cap %s", formatSize(p), formatSize(r), formatSize(c))
			}
		})
	}
}

// mountConfigOf is the configuration `shardfs mount` makes of args (flags
// and positionals after "mount", in any order, as main takes them).
func mountConfigOf(t *testing.T, args ...string) (mountConfig, error) {
	t.Helper()
	app := newApp()
	mount := findCommand(app.Commands, "mount")
	var cfg mountConfig
	mount.Action = func(c *cli.Context) (err error) {
		cfg, err = mountConfigFrom(c)
		return err
	}
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	err := app.Run(hoistFlags(app, append([]string{"shardfs", "mount"}, args...)))
	return cfg, err
}

// --memory-target reaches the budgets from its flag, its fstab option and
// its environment variable. The machine's own cgroup limit may be lower
// than the target or absent; targets are kept small enough for any box
// that runs tests.
func TestMemoryTargetSizesTheMount(t *testing.T) {
	limit, err := cgroup.MemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	if limit.Bytes > 0 && limit.Bytes < 512*miB {
		t.Skipf("this process's cgroup limit (%s) is under the target the test sets", formatSize(limit.Bytes))
	}
	fstab, err := fstabArgs([]string{"shardfs", "s3://b", "/mnt", "-o", "memory_target=512MiB"}, findCommand(newApp().Commands, "mount").Flags)
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() (mountConfig, error){
		"flag":  func() (mountConfig, error) { return mountConfigOf(t, "--memory-target", "512MiB", "s3://b", "/mnt") },
		"fstab": func() (mountConfig, error) { return mountConfigOf(t, fstab[2:]...) },
		"env": func() (mountConfig, error) {
			t.Setenv("SHARDFS_MEMORY_TARGET", "512MiB")
			return mountConfigOf(t, "s3://b", "/mnt")
		},
	} {
		cfg, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Prefetch.Memory != 192*miB || cfg.Cache.MemorySize != 192*miB {
			t.Errorf("%s: read-ahead %s, RAM tier %s; want 192 MiB each", name, formatSize(cfg.Prefetch.Memory), formatSize(cfg.Cache.MemorySize))
		}
	}
	_, err = mountConfigOf(t, "--memory-target", "512MiB", "--prefetch-memory", "1GiB", "s3://b", "/mnt")
	if want := "--prefetch-memory 1.0 GiB needs 1.1 GiB, over --memory-target 512 MiB"; err == nil || err.Error() != want {
		t.Errorf("budget over the target: %v, want %q", err, want)
	}
	_, err = mountConfigOf(t, "--memory-target", "lots", "s3://b", "/mnt")
	if err == nil || !strings.HasPrefix(err.Error(), "--memory-target: ") {
		t.Errorf("bad size: %v, want an error naming --memory-target", err)
	}
}
