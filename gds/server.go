package gds

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/shardfs/shardfs/store"
)

// Files is the mount's view of its shards, as the GPU interface needs it.
type Files interface {
	// Object looks a shard up by its path relative to the mount root.
	Object(path string) (store.Object, bool)
	// ReadAt reads through the mount's read path (cache, else fetch), with
	// io.ReaderAt semantics.
	ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error)
}

// Config bounds what one handle may hold. Zero fields take defaults.
type Config struct {
	BlockSize        int64  // cache block size, reported in capabilities (default 1 MiB)
	Alignment        int64  // offset/length alignment that avoids extra work (default 4096)
	MaxRegistrations int    // buffers per handle (default 16)
	MaxBufferSize    int64  // bytes per registered buffer (default 4 GiB)
	MaxLeases        int    // leases per handle (default 64)
	MaxLeaseBytes    int64  // bytes one LEASE pins at most (default 64 MiB)
	ShmDir           string // where buffer names live (default "/dev/shm")

	// Limits across handles (see limits.go).
	MaxRegistrationsPerUID   int   // buffers one uid holds, all handles (default 64)
	MaxRegistrationsPerMount int   // buffers the mount holds (default 256)
	MaxLeasesPerUID          int   // leases one uid holds (default 256)
	MaxLeasedBytes           int64 // ring bytes all leases pin (default 4 GiB; set it to half the ring)
	MaxLeasedBytesPerUID     int64 // ring bytes one uid's leases pin (default 3/4 of MaxLeasedBytes)

	MaxBatch          int // entries per SUBMIT, and in flight per handle (default 256)
	MaxInFlightPerUID int // batch entries in flight per uid (default 1024)
	MaxInFlight       int // batch entries in flight per mount (default 4096)
	BatchWorkers      int // goroutines serving batch entries (default GOMAXPROCS, 4..32)
}

func (c Config) withDefaults() Config {
	if c.BlockSize <= 0 {
		c.BlockSize = 1 << 20
	}
	if c.Alignment <= 0 {
		c.Alignment = 4096
	}
	if c.MaxRegistrations <= 0 {
		c.MaxRegistrations = 16
	}
	if c.MaxBufferSize <= 0 {
		c.MaxBufferSize = 4 << 30
	}
	if c.MaxLeases <= 0 {
		c.MaxLeases = 64
	}
	if c.MaxLeaseBytes <= 0 {
		c.MaxLeaseBytes = 64 << 20
	}
	if c.ShmDir == "" {
		c.ShmDir = "/dev/shm"
	}
	if c.MaxRegistrationsPerUID <= 0 {
		c.MaxRegistrationsPerUID = 64
	}
	if c.MaxRegistrationsPerMount <= 0 {
		c.MaxRegistrationsPerMount = 256
	}
	if c.MaxLeasesPerUID <= 0 {
		c.MaxLeasesPerUID = 256
	}
	if c.MaxLeasedBytes <= 0 {
		c.MaxLeasedBytes = 4 << 30
	}
	if c.MaxLeasedBytesPerUID <= 0 {
		c.MaxLeasedBytesPerUID = c.MaxLeasedBytes / 4 * 3
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.MaxInFlightPerUID <= 0 {
		c.MaxInFlightPerUID = 1024
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 4096
	}
	if c.BatchWorkers <= 0 {
		c.BatchWorkers = defaultBatchWorkers()
	}
	return c
}

// Server answers the GPU interface of one mount. It is safe for
// concurrent use; every registration and lease belongs to one handle.
type Server struct {
	cfg     Config
	files   Files
	leaseFn leaseFunc
	// ramLeaseFn pins RAM-tier slots (LEASE_FROM_RAM); nil when the tier
	// is not shared.
	ramLeaseFn leaseFunc
	whole      WholeFiles // nil: WHOLE_FILE answers EOPNOTSUPP
	owner      uint32     // the daemon's uid, which owns the cache files
	gpus       GPUSource
	log        *slog.Logger

	nextID atomic.Uint64 // buffer and lease ids: never reused, so a stale id cannot alias

	// The batch path (batch.go, workers.go).
	queues    [residencies]chan *batchJob
	inFlight  inFlight
	startOnce sync.Once
	stopOnce  sync.Once
	quit      chan struct{}
	workers   sync.WaitGroup

	mu      sync.Mutex
	handles map[uint64]*handleState
	perUID  map[uint32]*usage
	total   usage
	refused limitCounters
	closed  bool
	caps    []byte // capabilities JSON, built once (GPU discovery is slow)
}

// handleState is what one open file holds. bufs and leases are guarded by
// Server.mu, inFlight by Server.inFlight.mu.
type handleState struct {
	handle uint64
	bufs   map[uint64]*buffer
	leases map[uint64]leaseHold

	// ctx ends when the handle is released: its batch entries still
	// queued or reading stop early.
	ctx       context.Context
	cancel    context.CancelFunc
	inFlight  int
	completed atomic.Uint64 // batch entries completed since open
	notifyMu  sync.Mutex
	notify    chan struct{} // closed (and replaced) at each completion
}

// leaseHold is one lease and whom it is counted against.
type leaseHold struct {
	pin
	uid   uint32
	bytes int64
}

// complete counts one completed batch entry and wakes the WAITs.
func (st *handleState) complete() {
	st.completed.Add(1)
	st.notifyMu.Lock()
	close(st.notify)
	st.notify = make(chan struct{})
	st.notifyMu.Unlock()
}

// completions returns a channel closed at the next completion.
func (st *handleState) completions() <-chan struct{} {
	st.notifyMu.Lock()
	defer st.notifyMu.Unlock()
	return st.notify
}

// NewServer returns a server reading through files. leaser may be nil (no
// cache ring: LEASE answers EOPNOTSUPP); when it also keeps whole-shard
// files (WholeFiles, as the mount's *cache.Cache does), WHOLE_FILE says
// where. gpus may be nil (no GPUs listed).
func NewServer(cfg Config, files Files, leaser Leaser, gpus GPUSource, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:        cfg,
		files:      files,
		leaseFn:    leaseFuncOf(leaser),
		ramLeaseFn: ramLeaseFuncOf(files),
		whole:      wholeFilesOf(leaser),
		owner:      uint32(os.Geteuid()),
		gpus:       gpus,
		log:        log,
		handles:    map[uint64]*handleState{},
		perUID:     map[uint32]*usage{},

		quit: make(chan struct{}),
		inFlight: inFlight{
			perHandle: cfg.MaxBatch, perUID: cfg.MaxInFlightPerUID, perMount: cfg.MaxInFlight,
			byUID: map[uint32]int{},
		},
	}
	for i := range s.queues {
		s.queues[i] = make(chan *batchJob, cfg.MaxInFlight) // never full: entries are bounded by MaxInFlight
	}
	return s
}

// Ioctl handles one ioctl. handle identifies the open file; obj is the
// shard it refers to, or nil for the ctl file. It returns the ioctl result
// (always 0 on success: counts travel in the structs) and an errno; the
// errno of each failure is documented in errno.go.
func (s *Server) Ioctl(ctx context.Context, handle uint64, uid, pid uint32, obj *store.Object, cmd uint32, in, out []byte) (int32, syscall.Errno) {
	if s.isClosed() {
		return 0, syscall.ENODEV
	}
	var reply []byte
	var err error
	switch cmd {
	case CmdRegister:
		reply, err = s.register(handle, uid, in, out)
	case CmdUnregister:
		err = s.unregister(handle, in)
	case CmdRead:
		reply, err = s.read(ctx, handle, obj, in, out)
	case CmdLease:
		reply, err = s.lease(ctx, handle, uid, obj, in, out)
	case CmdLeaseDrop:
		err = s.leaseDrop(handle, in)
	case CmdSubmit:
		reply, err = s.submit(ctx, handle, uid, obj, in, out)
	case CmdWait:
		reply, err = s.wait(ctx, handle, in, out)
	case CmdWholeFile:
		reply, err = s.wholeFile(uid, obj, in, out)
	default:
		return 0, syscall.ENOTTY
	}
	if err != nil {
		errno := toErrno(err)
		s.log.Debug("gds ioctl failed", "cmd", cmdName(cmd), "handle", handle, "uid", uid, "pid", pid, "errno", errno, "err", err)
		return 0, errno
	}
	copy(out, reply)
	return 0, 0
}

// Release drops every registration and lease made on handle. The kernel
// sends it only once no ioctl on the file is running, but READs that are
// still copying hold their buffer until they finish.
func (s *Server) Release(handle uint64) {
	s.mu.Lock()
	st := s.handles[handle]
	delete(s.handles, handle)
	s.releaseStateLocked(st)
	s.mu.Unlock()
	st.drop()
}

// Close releases every handle's registrations and leases; later ioctls
// fail with ENODEV.
func (s *Server) Close() {
	s.mu.Lock()
	handles := s.handles
	s.handles = map[uint64]*handleState{}
	for _, st := range handles {
		s.releaseStateLocked(st)
	}
	s.closed = true
	s.mu.Unlock()
	for _, st := range handles {
		st.drop()
	}
	s.stopWorkers()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// state returns handle's state, creating it when create is set; nil when
// absent (or the server is closed).
func (s *Server) stateLocked(handle uint64, create bool) *handleState {
	st := s.handles[handle]
	if st == nil && create && !s.closed {
		ctx, cancel := context.WithCancel(context.Background())
		st = &handleState{handle: handle, bufs: map[uint64]*buffer{}, leases: map[uint64]leaseHold{},
			ctx: ctx, cancel: cancel, notify: make(chan struct{})}
		s.handles[handle] = st
	}
	return st
}

// drop unmaps the buffers and releases the leases of a detached state.
func (st *handleState) drop() {
	if st == nil {
		return
	}
	st.cancel()
	for _, b := range st.bufs {
		b.close()
	}
	for _, p := range st.leases {
		p.Release()
	}
}

// resolve names the shard a READ or LEASE is about: the fd's own shard, or
// the path in the request on the ctl file.
func (s *Server) resolve(obj *store.Object, path string) (store.Object, error) {
	if obj != nil {
		return *obj, nil
	}
	path = strings.TrimLeft(path, "/")
	if path == "" {
		return store.Object{}, errEmptyPath
	}
	o, ok := s.files.Object(path)
	if !ok {
		return store.Object{}, errNoFile
	}
	return o, nil
}

func cmdName(cmd uint32) string {
	switch cmd {
	case CmdRegister:
		return "REGISTER"
	case CmdUnregister:
		return "UNREGISTER"
	case CmdRead:
		return "READ"
	case CmdLease:
		return "LEASE"
	case CmdLeaseDrop:
		return "LEASE_DROP"
	case CmdSubmit:
		return "SUBMIT"
	case CmdWait:
		return "WAIT"
	case CmdWholeFile:
		return "WHOLE_FILE"
	}
	return "?"
}
