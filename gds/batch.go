package gds

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/shardfs/shardfs/store"
)

// The batch path: SUBMIT copies a client's queue entries into daemon memory,
// checks them, and hands them to the server's workers; each worker serves an
// entry (through the mount's read path, into the entry's registered buffer)
// and then writes the entry's result and state word back into the queue.
// Entries complete in any order. WAIT sleeps on the handle's completion
// count.
//
// Nothing read from client memory is trusted after it is copied: the entry
// fields and path bytes are copied once, under the queue buffer's read lock,
// and every later write into client memory runs on a goroutine that turns a
// fault (a buffer truncated under us) into an error.
//
// Lock order: Server.mu, then buffer.mu (read), then handleState.notifyMu.
// A worker holds no Server.mu while it reads.

// Residency is where a range's bytes are now, as cheaply as the read path
// can tell without reading them. Workers serve RAM entries first, then ring
// entries, then those that must be fetched, so a slow GET never delays
// bytes that are already in memory.
type Residency int

const (
	ResidentRAM Residency = iota
	ResidentRing
	ResidentStore
	residencies
)

// ResidencyProber is implemented by Files that can say where a range is.
// Without it every entry is served in submission order.
type ResidencyProber interface {
	Residency(obj store.Object, off, n int64) Residency
}

// batchJob is one accepted entry.
type batchJob struct {
	st       *handleState
	uid      uint32
	queue    *buffer // where the completion is written
	entryOff uint64  // offset of the entry in the queue
	entry    BatchEntry
	obj      store.Object
	err      error // set when the entry failed its checks: completed at once
	done     *sync.WaitGroup
}

// submit handles SUBMIT.
func (s *Server) submit(ctx context.Context, handle uint64, uid uint32, obj *store.Object, in, out []byte) ([]byte, error) {
	if len(out) < submitSize {
		return nil, fmt.Errorf("reply room %d bytes: %w", len(out), ErrShortPayload)
	}
	req, err := DecodeSubmit(in)
	if err != nil {
		return nil, err
	}
	if req.Count == 0 {
		return nil, fmt.Errorf("empty batch: %w", syscall.EINVAL)
	}
	if req.Count > uint32(s.cfg.MaxBatch) {
		return nil, fmt.Errorf("batch of %d entries, limit %d: %w", req.Count, s.cfg.MaxBatch, syscall.E2BIG)
	}
	q, err := s.buffer(handle, req.QueueBufID)
	if err != nil {
		return nil, err
	}
	jobs, err := s.copyEntries(q, req, obj)
	if err != nil {
		return nil, err
	}
	st, err := s.openState(handle)
	if err != nil {
		return nil, err
	}
	if err := s.inFlight.acquire(st, uid, len(jobs)); err != nil {
		return nil, err
	}
	var done *sync.WaitGroup
	if req.Flags&SubmitWait != 0 {
		done = new(sync.WaitGroup)
		done.Add(len(jobs))
	}
	s.startWorkers()
	for i := range jobs {
		j := &jobs[i]
		j.st, j.uid, j.done = st, uid, done
		s.queues[s.jobResidency(j)] <- j
	}
	if done != nil {
		if err := waitGroup(ctx, done); err != nil {
			return nil, err
		}
	}
	req.Accepted = uint64(len(jobs))
	req.Completed = st.completed.Load()
	return req.Encode()
}

// copyEntries copies count entries (and their paths) out of the queue and
// checks each; an entry that fails its checks becomes a job that completes
// at once with its errno. The queue itself must hold them all.
func (s *Server) copyEntries(q *buffer, req SubmitReq, obj *store.Object) (jobs []batchJob, err error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.mem == nil {
		return nil, fmt.Errorf("queue buffer %d unregistered: %w", req.QueueBufID, syscall.EBADF)
	}
	size := uint64(len(q.mem))
	span := uint64(req.Count) * uint64(BatchEntrySize)
	if req.EntriesOff%8 != 0 || req.EntriesOff > size || span > size-req.EntriesOff {
		return nil, fmt.Errorf("entries %d+%d in a %d-byte queue (8-byte aligned): %w", req.EntriesOff, span, size, syscall.ERANGE)
	}
	if err := q.stillBacked(); err != nil {
		return nil, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			jobs, err = nil, fmt.Errorf("queue buffer %d faulted (%v): %w", req.QueueBufID, r, syscall.EFAULT)
		}
	}()
	raw := make([]byte, span)
	copy(raw, q.mem[req.EntriesOff:])
	jobs = make([]batchJob, req.Count)
	for i := range jobs {
		j := &jobs[i]
		j.queue, j.entryOff = q, req.EntriesOff+uint64(i*BatchEntrySize)
		j.entry = DecodeEntry(raw[i*BatchEntrySize:])
		j.obj, j.err = s.entryObject(q.mem, j.entry, obj)
	}
	return jobs, nil
}

// entryObject resolves an entry's shard: its path in the queue, or the fd's
// own shard when it names none.
func (s *Server) entryObject(queue []byte, e BatchEntry, obj *store.Object) (store.Object, error) {
	if e.Reserved != 0 {
		return store.Object{}, fmt.Errorf("reserved word %#x: %w", e.Reserved, ErrBadField)
	}
	if e.PathLen == 0 {
		if obj == nil {
			return store.Object{}, errEmptyPath
		}
		return *obj, nil
	}
	end := uint64(e.PathOff) + uint64(e.PathLen)
	if e.PathLen >= PathSize || end > uint64(len(queue)) {
		return store.Object{}, fmt.Errorf("path %d+%d outside the queue or longer than %d: %w", e.PathOff, e.PathLen, PathSize-1, syscall.ERANGE)
	}
	path := string(queue[e.PathOff:end])
	if strings.IndexByte(path, 0) >= 0 {
		return store.Object{}, fmt.Errorf("NUL in path: %w", ErrBadField)
	}
	return s.resolve(nil, path)
}

// jobResidency orders an entry: ones answered without reading go first.
func (s *Server) jobResidency(j *batchJob) Residency {
	if j.err != nil {
		return ResidentRAM
	}
	return s.residency(j.obj, j.entry.FileOffset, j.entry.Length)
}

// residency is where [off, off+n) of o is, as far as Files can tell
// (ResidentStore when it cannot); an empty range is ResidentRAM.
func (s *Server) residency(o store.Object, off, n uint64) Residency {
	if off >= uint64(o.Size) {
		return ResidentRAM
	}
	p, ok := s.files.(ResidencyProber)
	if !ok {
		return ResidentStore
	}
	return p.Residency(o, int64(off), int64(min(n, uint64(o.Size)-off)))
}

// openState returns handle's state, made on first use; ENODEV once the
// server is closed.
func (s *Server) openState(handle uint64) (*handleState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stateLocked(handle, true); st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("server closed: %w", syscall.ENODEV)
}

// waitGroup waits for wg, or for ctx (the caller was interrupted; the jobs
// still complete and write their results).
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveJob reads one entry and writes its completion. Runs on a worker.
func (s *Server) serveJob(j *batchJob) {
	res := s.readEntry(j)
	s.writeCompletion(j, res)
	s.inFlight.release(j.st, j.uid, 1)
	j.st.complete()
	if j.done != nil {
		j.done.Done()
	}
}

// readEntry serves one entry: bytes read, or -errno.
func (s *Server) readEntry(j *batchJob) int64 {
	if j.err != nil {
		return -int64(toErrno(j.err))
	}
	if err := j.st.ctx.Err(); err != nil {
		return -int64(syscall.EINTR) // the handle is gone: nobody waits
	}
	e := j.entry
	if e.FileOffset > uint64(j.obj.Size) {
		return -int64(syscall.ERANGE)
	}
	b, err := s.buffer(j.st.handle, e.BufID)
	if err != nil {
		return -int64(toErrno(err))
	}
	n, err := s.readInto(j.st.ctx, b, j.obj, ReadReq{FileOffset: e.FileOffset, Length: e.Length, BufID: e.BufID, BufOffset: e.BufOffset})
	if err != nil {
		return -int64(toErrno(err))
	}
	return int64(n)
}

// writeCompletion stores res, then the state word, into the entry in the
// queue. A queue unregistered (or a handle closed) meanwhile gets nothing:
// nobody is left to read it.
func (s *Server) writeCompletion(j *batchJob, res int64) {
	q := j.queue
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.mem == nil {
		return
	}
	// Truncated under us: the client loses its own completion, nothing else.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { recover() }()
	entry := q.mem[j.entryOff : j.entryOff+uint64(BatchEntrySize)]
	binary.LittleEndian.PutUint64(entry[entryResultOff:], uint64(res))
	// The state word is written last and atomically: a client that sees
	// EntryDone sees the result too.
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&entry[entryStateOff])), EntryDone)
}

// wait handles WAIT.
func (s *Server) wait(ctx context.Context, handle uint64, in, out []byte) ([]byte, error) {
	if len(out) < waitSize {
		return nil, fmt.Errorf("reply room %d bytes: %w", len(out), ErrShortPayload)
	}
	req, err := DecodeWait(in)
	if err != nil {
		return nil, err
	}
	st, err := s.openState(handle)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(min(req.TimeoutMS, maxWaitMS)) * time.Millisecond
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		ch := st.completions()
		if st.completed.Load() >= req.Target {
			break
		}
		select {
		case <-ch:
			continue
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	req.Completed = st.completed.Load()
	return req.Encode()
}

// maxWaitMS caps one WAIT, so a client that asks for more than it submitted
// still returns (and a FUSE request never sits in the daemon for long).
const maxWaitMS = 10_000
