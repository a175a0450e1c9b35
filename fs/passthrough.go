package fs

// FUSE passthrough: an open of a shard that the cache holds whole, as a
// file whose offsets are the shard's, is handed to the kernel
// (FOPEN_PASSTHROUGH with that file as its backing), which then reads the
// file itself: no READ reaches the daemon. Every other open is served by
// the daemon as before.
//
// The file's bytes are checked before they are handed over: the cache's
// OpenWholeFile reads a file whole and compares its CRC32C with the
// journal's record at the file's first open in the mount's life and after
// the file changes (size, mtime, ctime, inode), and drops a file that
// fails; the open is then served by the daemon, whose reads come from the
// ring's checked blocks or the store, never from a whole-shard file. An
// open that joins an inode already passed through reads the backing file
// its first open registered, checked when that open was made.
//
// Where this is decided: openMode, below, the one place. It is per open
// and per inode: the kernel refuses an open whose mode differs from the
// inode's other open files (a cached open beside a passed-through one
// fails with EIO), so an inode keeps the mode of its first open until its
// last one is released. go-fuse gives every passed-through open of an
// inode the backing file registered by the first, so a later open keeps
// reading the same bytes even after the cache evicted (unlinked) the file.
//
// Passthrough needs CAP_SYS_ADMIN, a kernel with FUSE passthrough (6.9)
// and a cache dir on a filesystem that can back one (not overlayfs or
// another FUSE mount: the stacking depth). Mount probes once by
// registering a file of the cache dir; a refusal is logged once and the
// mount serves every open through the daemon.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shardfs/shardfs/store"
)

// Passthrough says whether opens of shards held whole may be passed to
// the kernel.
type Passthrough uint8

const (
	// PassthroughAuto (the default): when the mount's probe succeeds.
	PassthroughAuto Passthrough = iota
	// PassthroughOff: every open is served by the daemon.
	PassthroughOff
)

func (p Passthrough) String() string {
	if p == PassthroughOff {
		return "off"
	}
	return "auto"
}

// ParsePassthrough reads "auto" or "off".
func ParsePassthrough(s string) (Passthrough, error) {
	switch s {
	case "auto":
		return PassthroughAuto, nil
	case "off":
		return PassthroughOff, nil
	}
	return PassthroughAuto, fmt.Errorf("passthrough %q: want auto or off", s)
}

// WholeFiles is the cache's tier of shards held as whole files
// (cache.Cache satisfies it).
type WholeFiles interface {
	// OpenWholeFile returns a read-only descriptor of obj's whole file
	// when the cache holds the complete file of obj's version and the
	// file passes its CRC32C check (made at its first open in the
	// mount's life and after any change of the file; a file that fails
	// is dropped). The kernel serves a passed-through open's reads from
	// this descriptor with nothing of ours between: the check is the
	// only one its bytes get.
	OpenWholeFile(obj store.Object) (*os.File, bool)
	// HasWholeFile reports whether the cache holds obj's version whole,
	// without opening or checking the file.
	HasWholeFile(obj store.Object) bool
	// WholeFilesDir is the directory of the files ("" when there is
	// none); the mount's probe registers a file of it.
	WholeFilesDir() string
}

// openMode is how one open of a shard is served.
type openMode uint8

const (
	viaDaemon     openMode = iota // READs reach fileHandle.Read
	passedThrough                 // the kernel reads the backing file
)

// inodeOpens is the mode of an inode's open handles and their count.
type inodeOpens struct {
	mu   sync.Mutex
	n    int
	mode openMode
}

// openMode decides how a new open of f is served and counts it: the mode
// of the inode's other open handles when there are any, else passthrough
// when the mount has it and the cache holds f's version whole. backing is
// that whole file, open (nil when a handle joins a backing file already
// registered and the cache no longer holds it).
func (f *fileNode) openMode() (mode openMode, backing *os.File) {
	o := &f.opens
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.n > 0 && o.mode == viaDaemon:
	case o.n > 0 || f.m.passthrough.Load():
		if wf := f.m.opts.WholeFiles; wf != nil {
			backing, _ = wf.OpenWholeFile(f.obj)
		}
		if backing != nil || o.n > 0 {
			mode = passedThrough
		}
	}
	o.n++
	o.mode = mode
	return mode, backing
}

func (f *fileNode) released() {
	f.opens.mu.Lock()
	defer f.opens.mu.Unlock()
	f.opens.n--
	if f.opens.n == 0 {
		f.fills.reset()
	}
}

// passthroughHandle is an open the kernel serves from a backing file. It
// still answers ioctls and, should go-fuse not register the backing file,
// reads through the daemon.
type passthroughHandle struct {
	*fileHandle
	backing *os.File
}

var _ = (gofs.FilePassthroughFder)((*passthroughHandle)(nil))

// PassthroughFd is asked for by go-fuse when the inode has no backing
// file registered yet.
func (h *passthroughHandle) PassthroughFd() (int, bool) {
	if h.backing == nil {
		return 0, false
	}
	return int(h.backing.Fd()), true
}

func (h *passthroughHandle) Release(ctx context.Context) syscall.Errno {
	if h.backing != nil {
		h.backing.Close() // the kernel holds its own reference
	}
	return h.fileHandle.Release(ctx)
}

// probePassthrough registers a file of the cache's whole-file dir as a
// backing file and drops it again: whether this kernel, this process and
// that filesystem allow passthrough. It reports the answer once in the
// log and turns passthrough on when it was allowed.
func (m *mountState) probePassthrough(server *fuse.Server) {
	if m.opts.Passthrough == PassthroughOff {
		m.opts.Log.Info("passthrough off (--passthrough off): every read is served by the daemon")
		return
	}
	dir := ""
	if m.opts.WholeFiles != nil {
		dir = m.opts.WholeFiles.WholeFilesDir()
	}
	if dir == "" {
		m.opts.Log.Info("passthrough unused: no whole-shard files (they need --cache-dir and --whole-shard-percent above 0)")
		return
	}
	if err := registerProbe(server, dir); err != nil {
		m.opts.Log.Warn("passthrough refused; shards held whole are served by the daemon like the others",
			"effect", "more daemon CPU per byte", "dir", dir, "err", err)
		return
	}
	m.passthrough.Store(true)
	m.opts.Log.Info("passthrough on: the kernel reads shards held whole from their files", "dir", dir)
}

func registerProbe(server *fuse.Server, dir string) error {
	f, err := os.CreateTemp(dir, "probe-*"+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		return fmt.Errorf("registering a backing file: %w", errno)
	}
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Errorf("dropping the probe's backing file: %w", errno)
	}
	return nil
}
