package fs

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// KernelOptions are the knobs of the kernel side of the mount. The
// defaults are the values that did best for streaming large shards; the
// figures behind them are in docs/BENCHMARKS.md.
type KernelOptions struct {
	FSName        string // shown in /proc/mounts, e.g. the source
	MaxRequest    int    // largest READ the kernel sends (1 MiB: max_pages 256)
	MaxReadAhead  int    // FUSE init max_readahead
	MaxBackground int    // async requests the kernel keeps in flight
	ReadAheadKB   int    // the mount's bdi read_ahead_kb; 0 leaves the kernel default
	AllowOther    bool
	Debug         bool
}

// DefaultKernelOptions are tuned for streaming large shards. A 4 MiB bdi
// read-ahead (the kernel's FUSE default is 128 KiB) makes the kernel send
// 1 MiB READs, up to two windows ahead of the reader: fewer, larger
// requests cost the daemon less CPU per byte, and cold sequential reads
// lose nothing by it. The prefetch
// policy's reorder window is sized from it (cmd/shardfs/config.go), so
// the out-of-order requests of those windows do not look like seeks.
func DefaultKernelOptions() KernelOptions {
	return KernelOptions{MaxRequest: 1 << 20, MaxReadAhead: 1 << 20, MaxBackground: 64, ReadAheadKB: 4096}
}

// Mount mounts root at dir and starts serving it. It does not wait for the
// kernel's first request, and makes none of its own: the caller checks
// from another process that the mount answers, then calls Answering. A
// request of this process to its own mount, once the kernel has handed it
// to the daemon, cannot be interrupted: a kill -9 landing then (or a file
// of the mount still open when the process exits, whose close the kernel
// must report) would leave the daemon unable to exit and the mount hung
// until its connection was aborted by hand. go-fuse's own Mount makes
// such a request (WaitMount opens a file of the mount to learn that POLL
// is not served; nothing in this process polls a file of its mount), so it
// is not used. The caller owns the server: Wait for it, Unmount to stop it.
func Mount(dir string, root *Root, k KernelOptions) (*fuse.Server, error) {
	timeout := root.m.opts.AttrTimeout
	negative := time.Minute
	direct := os.Geteuid() == 0 && !fusermountInstalled()
	opts := &gofs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &negative,
		UID:             root.m.opts.UID,
		GID:             root.m.opts.GID,
		MountOptions: fuse.MountOptions{
			FsName:        k.FSName,
			Name:          "shardfs",
			MaxWrite:      k.MaxRequest,
			MaxReadAhead:  k.MaxReadAhead,
			MaxBackground: k.MaxBackground,
			AllowOther:    k.AllowOther,
			Debug:         k.Debug,
			// Root calls mount(2) itself where no fusermount is installed,
			// as in a container image or on a bare node (a CSI node
			// plugin, a GPU node).
			DirectMount: direct,
			// Reads are served from memory; splicing 1 MiB plus a header
			// overflows the default pipe and only falls back to a copy.
			DisableSplice: true,
			// Under DirectIO a reader may still mmap a shard (numpy memmap,
			// an indexed tar): the kernel then pages it in as usual.
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP,
			// At info: --debug-fuse asks for every request whatever the
			// --log-level, and go-fuse's own warnings come this way too.
			Logger: slog.NewLogLogger(root.m.opts.Log.Handler(), slog.LevelInfo),
			// The mount is read-only by contract, but "ro" would make the
			// kernel refuse writes to /.shardfs/hints too; every node
			// answers EROFS itself instead.
		},
	}
	server, err := fuse.NewServer(gofs.NewNodeFS(root, opts), dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	if direct {
		closeFuseOnExec()
	}
	go server.Serve()
	return server, nil
}

// Answering finishes a mount that answers (checked from another process):
// the passthrough probe, and the kernel's read-ahead for the mount's
// device dev (the st_dev of a file of the mount).
func Answering(server *fuse.Server, root *Root, k KernelOptions, dev uint64) {
	root.m.probePassthrough(server)
	if k.ReadAheadKB > 0 {
		if err := setReadAhead(dev, k.ReadAheadKB); err != nil {
			root.m.opts.Log.Info("kernel read-ahead left at its default", "err", err)
		}
	}
}

// setReadAhead raises the read-ahead of the backing device info of the
// mount whose device is dev, which bounds how far the kernel reads ahead
// of a sequential reader.
func setReadAhead(dev uint64, kb int) error {
	major, minor := (dev>>8)&0xfff, (dev&0xff)|((dev>>12)&0xfff00)
	path := filepath.Join("/sys/class/bdi", fmt.Sprintf("%d:%d", major, minor), "read_ahead_kb")
	if err := os.WriteFile(path, []byte(strconv.Itoa(kb)), 0); err != nil {
		return fmt.Errorf("set %s: %w", path, err)
	}
	return nil
}

// fusermountInstalled reports whether go-fuse would find fusermount3 or
// fusermount: on the PATH, or in /bin, where it also looks.
func fusermountInstalled() bool {
	for _, name := range []string{"fusermount3", "fusermount", "/bin/fusermount3", "/bin/fusermount"} {
		if _, err := exec.LookPath(name); err == nil {
			return true
		}
	}
	return false
}

// closeFuseOnExec marks the descriptors of /dev/fuse this process holds
// close-on-exec. go-fuse opens /dev/fuse without it when it calls mount(2)
// itself, and a child started after the mount (the readiness check) would
// then hold the connection: with a request of its own to the mount in
// flight when the daemon died, it would wait for ever, since the kernel
// aborts a connection only once its last descriptor is closed.
func closeFuseOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			syscall.CloseOnExec(fd)
		}
	}
}
