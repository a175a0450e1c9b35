//go:build e2e

package test

import (
	"bytes"
	"errors"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/gds"
)

// TestGDSBatchThroughMount drives the batch commands from Go through a real
// kernel mount: one SUBMIT of many READs into a registered buffer,
// completions read from the queue's state words as WAIT reports them, an
// entry naming another handle's buffer, and a batch over the bound.
func TestGDSBatchThroughMount(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	files := writeRandomFiles(t, src, map[string]int{"a.tar": 3<<20 + 123, "sub/b.tar": 9 << 20})
	m := mountShardfs(t, src, "--cache-dir", t.TempDir(), "--cache-size", "64MiB")
	ctl := openCtl(t, m.dir)
	other := openCtl(t, m.dir)
	queueMem, queueID := registerShm(t, ctl, 64<<10)
	dataMem, dataID := registerShm(t, ctl, 16<<20)
	_, otherID := registerShm(t, other, 1<<20)

	// 48 random ranges of both files, packed into the data buffer.
	rng := mrand.New(mrand.NewPCG(1, 2))
	names := []string{"a.tar", "sub/b.tar"}
	pathAt := map[string]uint32{}
	paths := uint32(32 << 10)
	for _, n := range names {
		pathAt[n] = paths
		paths += uint32(copy(queueMem[paths:], n))
	}
	type want struct {
		at   uint64
		data []byte
	}
	var wants []want
	at := uint64(0)
	for i := range 48 {
		name := names[i%2]
		data := files[name]
		off := rng.Uint64N(uint64(len(data)))
		n := min(1+rng.Uint64N(400_000), uint64(len(data))-off)
		e := gds.BatchEntry{UserData: uint64(i), FileOffset: off, Length: n, BufID: dataID, BufOffset: at,
			PathOff: pathAt[name], PathLen: uint32(len(name))}
		copy(queueMem[i*gds.BatchEntrySize:], e.Encode())
		wants = append(wants, want{at, data[off : off+n]})
		at += n
	}
	r, err := submit(ctl, gds.SubmitReq{QueueBufID: queueID, Count: 48})
	if err != nil || r.Accepted != 48 {
		t.Fatalf("submit: accepted %d, %v", r.Accepted, err)
	}
	deadline := time.Now().Add(batchTimeout)
	for done := r.Completed; done < 48; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 48 entries completed in %v", done, batchTimeout)
		}
		out, err := call(ctl, gds.CmdWait, gds.WaitReq{Target: done + 1, TimeoutMS: 1000})
		if errors.Is(err, syscall.EINTR) {
			continue // a signal (the Go runtime's preemption) cut the sleep short
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		w, _ := gds.DecodeWait(out)
		done = w.Completed
	}
	for i, w := range wants {
		e := entryAt(queueMem, i)
		if e.State != gds.EntryDone || e.Result != int64(len(w.data)) || e.UserData != uint64(i) {
			t.Fatalf("entry %d: state %d result %d user_data %d, want done, %d, %d", i, e.State, e.Result, e.UserData, len(w.data), i)
		}
		if !bytes.Equal(dataMem[w.at:w.at+uint64(len(w.data))], w.data) {
			t.Fatalf("entry %d: buffer bytes differ from the file", i)
		}
	}

	// Another handle's buffer: that entry fails alone, with EBADF.
	a := files["a.tar"]
	copy(queueMem[0:], gds.BatchEntry{Length: 100, BufID: otherID, PathOff: pathAt["a.tar"], PathLen: 5}.Encode())
	copy(queueMem[gds.BatchEntrySize:], gds.BatchEntry{FileOffset: 7, Length: 100, BufID: dataID, PathOff: pathAt["a.tar"], PathLen: 5}.Encode())
	for {
		_, err := submit(ctl, gds.SubmitReq{Count: 2, QueueBufID: queueID, Flags: gds.SubmitWait})
		if err == nil {
			break
		}
		// Interrupted while waiting: the entries run on, and complete.
		if !errors.Is(err, syscall.EINTR) {
			t.Fatalf("submit: %v", err)
		}
		waitState(t, queueMem, 1)
	}
	if e := entryAt(queueMem, 0); e.State != gds.EntryDone || e.Result != -int64(syscall.EBADF) {
		t.Fatalf("entry naming another handle's buffer: state %d result %d, want -EBADF", e.State, e.Result)
	}
	if e := entryAt(queueMem, 1); e.Result != 100 || !bytes.Equal(dataMem[:100], a[7:107]) {
		t.Fatalf("entry beside it: result %d", e.Result)
	}

	// More entries than one SUBMIT may carry.
	if _, err := submit(ctl, gds.SubmitReq{Count: 257, QueueBufID: queueID}); !errors.Is(err, syscall.E2BIG) {
		t.Fatalf("SUBMIT of 257 entries: %v, want E2BIG", err)
	}
}

// batchTimeout bounds the wait for batch entries to complete: a hang
// guard, not a speed the test asks for.
const batchTimeout = 2 * time.Minute

// waitState waits for entry i's state word; batchTimeout bounds an entry
// that never completes.
func waitState(t *testing.T, queue []byte, i int) {
	for deadline := time.Now().Add(batchTimeout); entryAt(queue, i).State != gds.EntryDone; {
		if time.Now().After(deadline) {
			t.Fatalf("entry %d not completed in %v", i, batchTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func openCtl(t *testing.T, mnt string) int {
	t.Helper()
	fd, err := unix.Open(filepath.Join(mnt, ".shardfs", "ctl"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// registerShm makes a 0600 shm buffer, registers it on fd and maps it here.
func registerShm(t *testing.T, fd int, size int64) ([]byte, uint64) {
	t.Helper()
	name, f, err := ownShm(size, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join("/dev/shm", name)); f.Close() })
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	out, err := call(fd, gds.CmdRegister, gds.RegisterReq{Name: name, Size: uint64(size)})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	r, err := gds.DecodeRegister(out)
	if err != nil {
		t.Fatal(err)
	}
	return mem, r.BufID
}

func submit(fd int, req gds.SubmitReq) (gds.SubmitReq, error) {
	out, err := call(fd, gds.CmdSubmit, req)
	if err != nil {
		return gds.SubmitReq{}, err
	}
	return gds.DecodeSubmit(out)
}

func entryAt(queue []byte, i int) gds.BatchEntry {
	return gds.DecodeEntry(queue[i*gds.BatchEntrySize:])
}
