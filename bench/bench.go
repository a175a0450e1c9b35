// Package bench owns the read workloads that measure a mount: cold
// sequential throughput, time to first byte and random reads, run the same
// way straight against a store (the ceiling without FUSE) and over the
// files of any mounted directory (shardfs, s3fs, rclone mount), so the
// figures compare like with like. Each workload prints one JSON line. The
// same package holds the driver of `shardfs bench run` (driver.go) and its
// report (report.go); the workloads themselves never mount anything and
// know nothing of shardfs' internals.
//
// The driver gives every pass a deadline (Run.Timeout: the scenario's or
// the workload's timeout_s, else one derived from the workload's
// parameters). A pass past it is ended (deadline.go): its readers killed
// as one process group, a shardfs daemon's goroutines dumped (SIGQUIT),
// the mount unmounted, lazily when busy, a daemon that does not exit
// killed, and its FUSE connection aborted as the last resort; the row is recorded as failed,
// "timeout after Ns", with what was done, and the driver goes on. Each
// row names the tree of the shardfs binary it measured, as that binary's
// --version says (version.go), not the tree the driver runs from.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/shardfs/shardfs/store"
)

// Settings are the parameters of the workloads.
type Settings struct {
	Name        string
	Workloads   []string
	Chunk       int64 // one read of the sequential workload
	RangeSize   int64 // sequential job size; 0: whole objects
	Workers     int   // parallel sequential jobs
	Readers     int
	Opens       int
	TTFBSize    int64
	RandomSize  int64
	RandomReads int
	Seed        int64
}

// RunWorkloads runs the chosen workloads in order and prints one JSON object per
// workload: its figures, the CPU seconds this process spent on it
// (reader_cpu_s) and what extra adds (the target's own counters). The
// driver reads these lines as a workload's figures.
func RunWorkloads(ctx context.Context, w io.Writer, t Target, s Settings, extra func() map[string]float64) error {
	items := t.items()
	if len(items) == 0 {
		return fmt.Errorf("nothing to read: no objects matched")
	}
	enc := json.NewEncoder(w)
	for _, wl := range s.Workloads {
		var figs map[string]float64
		cpuBefore := cpuSeconds()
		switch wl {
		case "seq":
			r, err := sequential(ctx, t, items, s)
			if err != nil {
				return fmt.Errorf("seq: %w", err)
			}
			figs = map[string]float64{"bytes": float64(r.bytes), "seconds": r.seconds, "mbps": float64(r.bytes) / r.seconds / 1e6}
		case "ttfb":
			r, err := firstByte(ctx, t, items, s)
			if err != nil {
				return fmt.Errorf("ttfb: %w", err)
			}
			figs = map[string]float64{"opens": float64(r.opens), "bytes": float64(int64(r.opens) * s.TTFBSize),
				"ttfb_ms": r.median, "min_ms": r.min, "max_ms": r.max}
		case "random":
			r, err := random(ctx, t, items, s)
			if err != nil {
				return fmt.Errorf("random: %w", err)
			}
			figs = map[string]float64{"reads": float64(r.reads), "size": float64(s.RandomSize), "bytes": float64(r.bytes),
				"seconds": r.seconds, "reads_per_s": float64(r.reads) / r.seconds, "mbps": float64(r.bytes) / r.seconds / 1e6}
		}
		figs["reader_cpu_s"] = cpuSeconds() - cpuBefore
		for k, v := range extra() {
			figs[k] = v
		}
		line := map[string]any{"name": s.Name, "workload": wl}
		for k, v := range figs {
			line[k] = v
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// item is one object or file to read.
type item struct {
	key  string
	size int64
}

// Target is what the workloads read from.
type Target interface {
	items() []item
	// open starts reading one item, as a reader starting a shard does.
	open(ctx context.Context, it item) (itemReader, error)
}

// itemReader reads one opened item.
type itemReader interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	Close() error
}

// Direct is the target of objects read with ranged GETs from st, the
// ceiling a mount can reach; "opening" costs nothing, so time to first
// byte is the time of the first GET.
func Direct(st store.Store, objs []store.Object) Target { return &directTarget{st: st, objs: objs} }

// directTarget reads objects with ranged GETs.
type directTarget struct {
	st   store.Store
	objs []store.Object
}

func (t *directTarget) items() []item {
	out := make([]item, len(t.objs))
	for i, o := range t.objs {
		out[i] = item{key: o.Key, size: o.Size}
	}
	return out
}

func (t *directTarget) open(_ context.Context, it item) (itemReader, error) {
	i := sort.Search(len(t.objs), func(i int) bool { return t.objs[i].Key >= it.key })
	if i == len(t.objs) || t.objs[i].Key != it.key {
		return nil, fmt.Errorf("%s: %w", it.key, store.ErrNotFound)
	}
	return objectReader{st: t.st, obj: t.objs[i]}, nil
}

type objectReader struct {
	st  store.Store
	obj store.Object
}

func (r objectReader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return r.st.ReadRange(ctx, r.obj, off, p)
}

func (r objectReader) Close() error { return nil }

// fileTarget reads regular files under a directory with open(2) and pread(2).
type fileTarget struct {
	dir   string
	files []item
}

// ListFiles walks dir for regular files whose relative path matches include.
// Walking is done before any timing, so a mount's listing cost stays out of
// the figures.
func ListFiles(dir, include string) (*fileTarget, error) {
	t := &fileTarget{dir: dir}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != dir {
				return filepath.SkipDir // /.shardfs and the like
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if include != "" {
			ok, err := path.Match(include, filepath.ToSlash(rel))
			if err != nil {
				return fmt.Errorf("--include %q: %w", include, err)
			}
			if !ok {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		t.files = append(t.files, item{key: filepath.ToSlash(rel), size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Slice(t.files, func(i, j int) bool { return t.files[i].key < t.files[j].key })
	return t, nil
}

func (t *fileTarget) items() []item { return t.files }

func (t *fileTarget) open(_ context.Context, it item) (itemReader, error) {
	f, err := os.Open(filepath.Join(t.dir, filepath.FromSlash(it.key)))
	if err != nil {
		return nil, err
	}
	return fileReader{f}, nil
}

type fileReader struct{ f *os.File }

func (r fileReader) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}

func (r fileReader) Close() error { return r.f.Close() }

// cpuSeconds is the user and system CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
