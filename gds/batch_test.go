package gds

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/store"
)

// queue is a client's view of a queue buffer: entries at 0, paths after.
type queue struct {
	f     *fixture
	id    uint64
	name  string
	paths uint32 // next free byte of the path area
}

const queueSize = 64 << 10

func (f *fixture) newQueue(handle uint64) *queue {
	id, name := f.mustRegister(handle, queueSize)
	return &queue{f: f, id: id, name: name, paths: 32 << 10}
}

// put writes entries at index 0.., each with its path (empty: the fd's shard).
func (q *queue) put(entries []BatchEntry, paths []string) {
	q.f.t.Helper()
	fd, err := os.OpenFile(filepath.Join("/dev/shm", q.name), os.O_RDWR, 0)
	if err != nil {
		q.f.t.Fatal(err)
	}
	defer fd.Close()
	for i, e := range entries {
		if p := paths[i]; p != "" {
			e.PathOff, e.PathLen = q.paths, uint32(len(p))
			if _, err := fd.WriteAt([]byte(p), int64(q.paths)); err != nil {
				q.f.t.Fatal(err)
			}
			q.paths += uint32(len(p))
		}
		if _, err := fd.WriteAt(e.Encode(), int64(i*BatchEntrySize)); err != nil {
			q.f.t.Fatal(err)
		}
	}
}

// completion returns entry i's state word and result.
func (q *queue) completion(i int) (uint32, int64) {
	e := DecodeEntry(shmBytes(q.f.t, q.name, int64(i*BatchEntrySize), int64(BatchEntrySize)))
	return e.State, e.Result
}

func (f *fixture) submit(handle uint64, obj *store.Object, req SubmitReq) (SubmitReq, syscall.Errno) {
	f.t.Helper()
	out, errno := f.ioctl(handle, obj, CmdSubmit, req)
	if errno != 0 {
		return SubmitReq{}, errno
	}
	r, err := DecodeSubmit(out)
	if err != nil {
		f.t.Fatal(err)
	}
	return r, 0
}

func (f *fixture) waitFor(handle uint64, target uint64, timeout time.Duration) uint64 {
	f.t.Helper()
	out, errno := f.ioctl(handle, nil, CmdWait, WaitReq{Target: target, TimeoutMS: uint32(timeout.Milliseconds())})
	if errno != 0 {
		f.t.Fatalf("wait: %v", errno)
	}
	r, err := DecodeWait(out)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Completed
}

func TestBatchServesEveryEntry(t *testing.T) {
	f := newFixture(t, Config{})
	q := f.newQueue(1)
	const bufSize = 8 << 20
	buf, bufName := f.mustRegister(1, bufSize)
	other, otherName := f.mustRegister(2, 1<<20) // another handle's buffer
	data := f.data[shard0]
	size := uint64(len(data))
	type want struct {
		result int64
		bytes  []byte
		at     uint64
	}
	var entries []BatchEntry
	var paths []string
	var wants []want
	add := func(path string, e BatchEntry, w want) {
		e.UserData = uint64(len(entries)) + 1000
		entries, paths, wants = append(entries, e), append(paths, path), append(wants, w)
	}
	for i := range uint64(6) { // 1 MiB aligned, out of file order
		off := (5 - i) << 19
		add(shard0, BatchEntry{FileOffset: off, Length: 1 << 19, BufID: buf, BufOffset: i << 19},
			want{1 << 19, data[off : off+1<<19], i << 19})
	}
	add(shard0, BatchEntry{FileOffset: size - 10, Length: 4096, BufID: buf, BufOffset: 7 << 20}, want{10, data[size-10:], 7 << 20})
	add("train/shard-001.tar", BatchEntry{FileOffset: 3, Length: 1000, BufID: buf, BufOffset: 6 << 20},
		want{1000, f.data["train/shard-001.tar"][3:1003], 6 << 20})
	add("no/such.tar", BatchEntry{Length: 10, BufID: buf}, want{result: -int64(syscall.ENOENT)})
	add(shard0, BatchEntry{Length: 10, BufID: other}, want{result: -int64(syscall.EBADF)})
	add(shard0, BatchEntry{FileOffset: size + 1, Length: 10, BufID: buf}, want{result: -int64(syscall.ERANGE)})
	add(shard0, BatchEntry{Length: 10, BufID: buf, BufOffset: bufSize - 5}, want{result: -int64(syscall.ERANGE)})
	add("", BatchEntry{Length: 10, BufID: buf}, want{result: -int64(syscall.EINVAL)}) // no path on the ctl file
	q.put(entries, paths)

	r, errno := f.submit(1, nil, SubmitReq{Flags: SubmitWait, QueueBufID: q.id, Count: uint32(len(entries))})
	if errno != 0 {
		t.Fatalf("submit: %v", errno)
	}
	if r.Accepted != uint64(len(entries)) || r.Completed != uint64(len(entries)) {
		t.Fatalf("accepted %d, completed %d, want %d each", r.Accepted, r.Completed, len(entries))
	}
	for i, w := range wants {
		state, res := q.completion(i)
		if state != EntryDone || res != w.result {
			t.Errorf("entry %d: state %d result %d, want %d %d", i, state, res, EntryDone, w.result)
			continue
		}
		if w.bytes != nil && !bytes.Equal(shmBytes(t, bufName, int64(w.at), int64(len(w.bytes))), w.bytes) {
			t.Errorf("entry %d: buffer bytes differ from the file", i)
		}
	}
	if got := DecodeEntry(shmBytes(t, q.name, 0, int64(BatchEntrySize))).UserData; got != 1000 {
		t.Errorf("user_data %d, want 1000 untouched", got)
	}
	if !bytes.Equal(shmBytes(t, otherName, 0, 10), make([]byte, 10)) {
		t.Error("another handle's buffer was written")
	}
}

// gatedFiles blocks reads at the offsets in gates until their channel closes.
type gatedFiles struct {
	Files
	mu      sync.Mutex
	gates   map[int64]chan struct{}
	entered chan int64 // each gated read, as it starts waiting
}

func (g *gatedFiles) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	g.mu.Lock()
	gate := g.gates[off]
	g.mu.Unlock()
	if gate != nil {
		select {
		case g.entered <- off:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return g.Files.ReadAt(ctx, obj, p, off)
}

func newGatedFixture(t *testing.T, cfg Config, offsets ...int64) (*fixture, *gatedFiles) {
	f := newFixture(t, cfg)
	g := &gatedFiles{Files: f.files, gates: map[int64]chan struct{}{}, entered: make(chan int64, 16)}
	for _, o := range offsets {
		g.gates[o] = make(chan struct{})
	}
	f.srv.Close()
	f.srv = NewServer(cfg, g, nil, nil, nil)
	t.Cleanup(f.srv.Close)
	return f, g
}

// Entries complete in any order: one held back does not keep the entry
// after it from completing, and a WAIT for more than was submitted returns
// at its timeout. The server runs in a synctest bubble, whose clock moves
// only once every goroutine waits: a WAIT's timeout cannot end it before
// the workers have done all they can, and its length is exact.
func TestBatchCompletesOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, g := newGatedFixture(t, Config{}, 0)
		q := f.newQueue(1)
		buf, name := f.mustRegister(1, 2<<20)
		q.put([]BatchEntry{
			{FileOffset: 0, Length: 1 << 20, BufID: buf},                           // held back
			{FileOffset: 1 << 20, Length: 1 << 20, BufID: buf, BufOffset: 1 << 20}, // free to run
		}, []string{shard0, shard0})
		if _, errno := f.submit(1, nil, SubmitReq{QueueBufID: q.id, Count: 2}); errno != 0 {
			t.Fatalf("submit: %v", errno)
		}
		if got := f.waitFor(1, 1, 5*time.Second); got != 1 {
			t.Fatalf("completed %d after the first wait, want 1", got)
		}
		if s, _ := q.completion(0); s != 0 {
			t.Fatal("the held-back entry completed")
		}
		if s, res := q.completion(1); s != EntryDone || res != 1<<20 {
			t.Fatalf("second entry: state %d result %d", s, res)
		}
		close(g.gates[0])
		if got := f.waitFor(1, 2, 5*time.Second); got != 2 {
			t.Fatalf("completed %d, want 2", got)
		}
		if !bytes.Equal(shmBytes(t, name, 0, 2<<20), f.data[shard0][:2<<20]) {
			t.Fatal("buffer bytes differ from the file")
		}
		const timeout = 50 * time.Millisecond
		start := time.Now()
		if got := f.waitFor(1, 3, timeout); got != 2 {
			t.Fatalf("completed %d, want 2", got)
		}
		if took := time.Since(start); took != timeout {
			t.Fatalf("a WAIT for more than was submitted returned after %v, want its timeout, %v", took, timeout)
		}
	})
}

func TestBatchBounds(t *testing.T) {
	f, g := newGatedFixture(t, Config{MaxBatch: 4, MaxInFlightPerUID: 6, MaxInFlight: 7}, 0)
	defer close(g.gates[0])
	held := func(n int) []BatchEntry {
		e := make([]BatchEntry, n)
		for i := range e {
			e[i] = BatchEntry{Length: 10, BufID: 0} // BufID set below
		}
		return e
	}
	submit := func(handle uint64, n int) syscall.Errno {
		q := f.newQueue(handle)
		buf, _ := f.mustRegister(handle, 1<<20)
		e := held(n)
		paths := make([]string, n)
		for i := range e {
			e[i].BufID, paths[i] = buf, shard0
		}
		q.put(e, paths)
		_, errno := f.submit(handle, nil, SubmitReq{QueueBufID: q.id, Count: uint32(n)})
		return errno
	}
	if errno := submit(1, 5); errno != syscall.E2BIG {
		t.Fatalf("batch over MaxBatch: %v, want E2BIG", errno)
	}
	if errno := submit(1, 4); errno != 0 {
		t.Fatalf("full batch: %v", errno)
	}
	if errno := submit(1, 1); errno != syscall.EAGAIN {
		t.Fatalf("past the handle's bound: %v, want EAGAIN", errno)
	}
	if errno := submit(2, 3); errno != syscall.EAGAIN {
		t.Fatalf("past the uid's bound: %v, want EAGAIN", errno)
	}
	if errno := submit(2, 2); errno != 0 {
		t.Fatalf("within the uid's bound: %v", errno)
	}
	if got := f.srv.Stats().BatchRefused; got != 2 {
		t.Fatalf("refused %d, want 2", got)
	}
}

// Releasing a handle with an entry in flight neither hangs nor leaves
// entries counted in flight, and unmaps the queue. This runs on the real
// clock, not in a synctest bubble: a Release stuck on a buffer's lock is
// not durably blocked, and would stall a bubble's clock instead of failing.
// The guard only bounds a hang; nothing here waits for a fixed time.
func TestBatchHandleClosedWithEntriesInFlight(t *testing.T) {
	f, g := newGatedFixture(t, Config{}, 0)
	defer close(g.gates[0]) // a failed check must not leave the read held
	q := f.newQueue(1)
	buf, _ := f.mustRegister(1, 1<<20)
	q.put([]BatchEntry{{Length: 1 << 20, BufID: buf}, {FileOffset: 1 << 20, Length: 1 << 20, BufID: buf}}, []string{shard0, shard0})
	if _, errno := f.submit(1, nil, SubmitReq{QueueBufID: q.id, Count: 2}); errno != 0 {
		t.Fatalf("submit: %v", errno)
	}
	<-g.entered // the first entry is reading into the buffer
	hang := time.After(time.Minute)
	done := make(chan struct{})
	go func() { f.srv.Release(1); close(done) }()
	select {
	case <-done:
	case <-hang:
		t.Fatal("Release hung on an entry in flight")
	}
	// The worker gives the entry's bound back just after its read returns.
	for n := f.srv.Stats().BatchInFlight; n != 0; n = f.srv.Stats().BatchInFlight {
		select {
		case <-hang:
			t.Fatalf("%d entries still in flight after the handle closed", n)
		case <-time.After(time.Millisecond):
		}
	}
	if mapped(t, q.name) {
		t.Fatal("queue buffer still mapped after release")
	}
}

func TestSubmitRejects(t *testing.T) {
	f := newFixture(t, Config{})
	q := f.newQueue(1)
	buf, _ := f.mustRegister(1, 1<<20)
	q.put([]BatchEntry{{Length: 10, BufID: buf}}, []string{shard0})
	old, _ := SubmitReq{QueueBufID: q.id, Count: 1}.Encode()
	binary.LittleEndian.PutUint32(old, 1)
	cases := map[string]struct {
		req  SubmitReq
		raw  []byte
		want syscall.Errno
	}{
		"empty":             {req: SubmitReq{QueueBufID: q.id}, want: syscall.EINVAL},
		"unknown flag":      {req: SubmitReq{QueueBufID: q.id, Count: 1, Flags: 2}, want: syscall.EINVAL},
		"unknown queue":     {req: SubmitReq{QueueBufID: 999, Count: 1}, want: syscall.EBADF},
		"past the queue":    {req: SubmitReq{QueueBufID: q.id, Count: 2, EntriesOff: uint64(queueSize - BatchEntrySize)}, want: syscall.ERANGE},
		"unaligned entries": {req: SubmitReq{QueueBufID: q.id, Count: 1, EntriesOff: 4}, want: syscall.ERANGE},
		"version 1":         {raw: old, want: syscall.EPROTO},
	}
	for name, c := range cases {
		in := c.raw
		if in == nil {
			in, _ = c.req.Encode()
		}
		out := make([]byte, len(in))
		if _, errno := f.srv.Ioctl(context.Background(), 1, uint32(os.Getuid()), 1, nil, CmdSubmit, in, out); errno != c.want {
			t.Errorf("%s: %v, want %v", name, errno, c.want)
		}
	}
}

func TestTruncatedQueueFailsCleanly(t *testing.T) {
	f := newFixture(t, Config{})
	q := f.newQueue(1)
	buf, _ := f.mustRegister(1, 1<<20)
	q.put([]BatchEntry{{Length: 10, BufID: buf}}, []string{shard0})
	if err := os.Truncate(filepath.Join("/dev/shm", q.name), 0); err != nil {
		t.Fatal(err)
	}
	if _, errno := f.submit(1, nil, SubmitReq{QueueBufID: q.id, Count: 1}); errno != syscall.EFAULT {
		t.Fatalf("submit on a truncated queue: %v, want EFAULT", errno)
	}
}
