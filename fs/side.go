package fs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/shardfs/shardfs/store"
)

// Side files live in /.shardfs. ctl and stats render their content at
// open, so a reader sees one consistent snapshot; hints takes writes.
const (
	sideCtl   = "ctl"
	sideStats = "stats"
	sideHints = "hints"
)

func (r *Root) addSideDir(ctx context.Context) {
	dir := r.NewPersistentInode(ctx, &sideDir{m: r.m},
		gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: 2})
	r.AddChild(SideDir, dir, false)
	m := r.m
	files := []struct {
		name string
		ino  uint64
		node gofs.InodeEmbedder
	}{
		{sideCtl, 3, &snapshotFile{m: m, render: m.capabilities, ioctls: true}},
		{sideStats, 4, &snapshotFile{m: m, render: m.stats}},
		{sideHints, 5, &hintsFile{m: m}},
	}
	for _, f := range files {
		child := dir.NewPersistentInode(ctx, f.node, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: f.ino})
		dir.AddChild(f.name, child, false)
	}
	index := dir.NewPersistentInode(ctx, &indexDir{m: m}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: 6})
	dir.AddChild(sideIndex, index, false)
}

// sideDir is /.shardfs: its children are the persistent side files, so
// go-fuse answers its lookups and readdir from them.
type sideDir struct {
	gofs.Inode
	readOnly
	m *mountState
}

var _ = (gofs.NodeGetattrer)((*sideDir)(nil))

func (d *sideDir) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.dirAttr(&out.Attr)
	out.SetTimeout(d.m.opts.AttrTimeout)
	return 0
}

func (m *mountState) capabilities(ctx context.Context) ([]byte, error) {
	if m.opts.GDS == nil {
		return []byte("{}\n"), nil
	}
	return m.opts.GDS.Capabilities(ctx)
}

func (m *mountState) stats(ctx context.Context) ([]byte, error) {
	if m.opts.Stats == nil {
		return []byte("{}\n"), nil
	}
	return m.opts.Stats()
}

// snapshotFile is a read-only side file whose content is rendered at open.
// Its size is unknown in advance, so it is served with direct I/O.
type snapshotFile struct {
	gofs.Inode
	readOnly
	m      *mountState
	render func(context.Context) ([]byte, error)
	ioctls bool
}

var (
	_ = (gofs.NodeGetattrer)((*snapshotFile)(nil))
	_ = (gofs.NodeOpener)((*snapshotFile)(nil))
)

func (f *snapshotFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Nlink = 1
	f.m.fillOwner(&out.Attr)
	out.SetTimes(nil, &f.m.mountTime, &f.m.mountTime)
	return 0
}

func (f *snapshotFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writeFlags(flags) {
		return nil, 0, syscall.EROFS
	}
	data, err := f.render(ctx)
	if err != nil {
		f.m.opts.Log.Error("rendering side file", "err", err)
		return nil, 0, errnoFor(err)
	}
	return &snapshotHandle{m: f.m, id: f.m.handles.Add(1), data: data, ioctls: f.ioctls}, fuse.FOPEN_DIRECT_IO, 0
}

type snapshotHandle struct {
	m      *mountState
	id     uint64
	data   []byte
	ioctls bool
}

var (
	_ = (gofs.FileReader)((*snapshotHandle)(nil))
	_ = (gofs.FileReleaser)((*snapshotHandle)(nil))
	_ = (gofs.FileIoctler)((*snapshotHandle)(nil))
)

func (h *snapshotHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:min(off+int64(len(dest)), int64(len(h.data)))]), 0
}

func (h *snapshotHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, in, out []byte) (int32, syscall.Errno) {
	if !h.ioctls {
		return 0, syscall.ENOTTY
	}
	return h.m.ioctl(ctx, h.id, nil, cmd, in, out)
}

func (h *snapshotHandle) Release(ctx context.Context) syscall.Errno {
	if h.ioctls && h.m.opts.GDS != nil {
		h.m.opts.GDS.Release(h.id)
	}
	return 0
}

// hintsFile takes the loader's schedule, one line each, in the order it
// will read: a path relative to the mount root (or absolute under the
// mount point), whose start is prefetched, or PATH OFFSET LENGTH, a byte
// range of it (package doc).
type hintsFile struct {
	gofs.Inode
	m *mountState
}

var (
	_ = (gofs.NodeGetattrer)((*hintsFile)(nil))
	_ = (gofs.NodeOpener)((*hintsFile)(nil))
	_ = (gofs.NodeSetattrer)((*hintsFile)(nil))
)

func (f *hintsFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o666
	out.Nlink = 1
	f.m.fillOwner(&out.Attr)
	out.SetTimes(nil, &f.m.mountTime, &f.m.mountTime)
	return 0
}

// hintsAttrChanges are the SETATTR fields that would change the hints
// file's mode, owner or times: the mount's, like every other file's.
const hintsAttrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_ATIME |
	fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME

// Setattr accepts the truncation to 0 that `echo path > hints` asks for,
// and refuses every other change with EROFS.
func (f *hintsFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); in.Valid&hintsAttrChanges != 0 || ok && size != 0 {
		return syscall.EROFS
	}
	return f.Getattr(ctx, fh, out)
}

func (f *hintsFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &hintsHandle{m: f.m}, fuse.FOPEN_DIRECT_IO, 0
}

type hintsHandle struct {
	m       *mountState
	mu      sync.Mutex
	partial []byte // an unfinished last line, completed by the next write
}

var (
	_ = (gofs.FileWriter)((*hintsHandle)(nil))
	_ = (gofs.FileReader)((*hintsHandle)(nil))
	_ = (gofs.FileFlusher)((*hintsHandle)(nil))
)

func (h *hintsHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

func (h *hintsHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines, rest, err := splitHints(h.partial, data)
	h.partial = rest
	if err != nil {
		h.m.hints.refused.Add(1)
		return 0, syscall.E2BIG
	}
	h.m.hint(writerOf(ctx), lines)
	return uint32(len(data)), 0
}

func (h *hintsHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.partial) > 0 {
		h.m.hint(writerOf(ctx), [][]byte{h.partial})
		h.partial = nil
	}
	return 0
}

// hint resolves the lines of one write: whole paths go to the
// prefetcher's hints, ranges to owner's schedule (owner: the writing
// process), bad lines to their counters.
func (m *mountState) hint(owner uint64, lines [][]byte) {
	var objs []store.Object
	var ranges []ScheduledRange
	named := 0 // whole-file lines, also those of shards passed through
	var bad [hintProblems]uint64
	var example [hintProblems]string
	note := func(kind hintProblem, line []byte) {
		if bad[kind] == 0 {
			example[kind] = strings.ToValidUTF8(string(line), "?")
		}
		bad[kind]++
	}
	t := m.tree()
	isFile := func(path string) bool { _, ok := t.object(path); return ok }
	kernelReads := map[string]bool{}
	for _, line := range lines {
		h, ok, garbage := parseHint(line, m.opts.MountPoint, isFile)
		if garbage {
			note(hintGarbage, line)
		}
		if !ok {
			continue
		}
		obj, found := t.object(h.path)
		switch {
		case !found:
			note(hintUnknown, []byte(h.path))
		case !h.ranged:
			named++
			if !m.readByKernel(obj, kernelReads) { // nothing to read ahead
				objs = append(objs, obj)
			}
		case h.length > HintRangeMax:
			note(hintHuge, line)
		case h.off >= obj.Size:
			note(hintPastEOF, line)
		case m.readByKernel(obj, kernelReads):
			// Its reads never reach the read path: a schedule of them
			// would only hold the window until it expired.
		default:
			if h.length > obj.Size-h.off {
				note(hintPastEOF, line)
			}
			ranges = append(ranges, ScheduledRange{Obj: obj, Off: h.off, Len: min(h.length, obj.Size-h.off)})
		}
	}
	m.hints.lines.Add(uint64(named))
	if len(objs) > 0 {
		m.opts.ReadPath.Hint(objs...)
	}
	if len(ranges) > 0 {
		res := m.opts.ReadPath.Schedule(owner, ranges)
		m.hints.ranges.Add(uint64(len(ranges)))
		bad[hintOverlapping] += uint64(res.Overlapping)
		bad[hintFull] += uint64(res.Full)
		example[hintOverlapping], example[hintFull] = rangeText(ranges, res.FirstOverlapping), rangeText(ranges, res.FirstFull)
	}
	for kind := range hintProblems {
		m.hints.problem(m.opts.Log, kind, bad[kind], example[kind])
	}
}

// readByKernel reports whether an open of obj would be passed to the
// kernel (passthrough.go): the cache holds obj whole and the mount passes
// such opens through. memo keeps the answer per key for one write. It
// does not open the file: an open may read the whole file to check it,
// which a write of hints must not wait for.
func (m *mountState) readByKernel(obj store.Object, memo map[string]bool) bool {
	if !m.passthrough.Load() || m.opts.WholeFiles == nil {
		return false
	}
	held, ok := memo[obj.Key]
	if !ok {
		held = m.opts.WholeFiles.HasWholeFile(obj)
		memo[obj.Key] = held
	}
	return held
}

// rangeText writes ranges[i] as its hints line, "" when i is out of range.
func rangeText(ranges []ScheduledRange, i int) string {
	if i < 0 || i >= len(ranges) {
		return ""
	}
	return fmt.Sprintf("%s %d %d", ranges[i].Obj.Key, ranges[i].Off, ranges[i].Len)
}

// writerOf is the process a FUSE request came from: the owner of the
// schedule it writes. 0 when the request carries none.
func writerOf(ctx context.Context) uint64 {
	if c, ok := fuse.FromContext(ctx); ok {
		return uint64(c.Pid)
	}
	return 0
}
