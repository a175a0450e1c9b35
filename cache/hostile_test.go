package cache

import (
	"bytes"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// sharedMapping maps a fresh /dev/shm file of n bytes, as a GPU client's
// registered buffer is mapped. It returns the mapping and the file, through
// which the test writes as the client (another process) would: by
// address the race detector does not watch.
func sharedMapping(t *testing.T, n int) ([]byte, *os.File) {
	t.Helper()
	f, err := os.CreateTemp("/dev/shm", "shardfs-cache-test-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	if err := f.Truncate(int64(n)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem, f
}

// A client that writes its buffer while a READ fills it (a second thread
// of the Python client) must get nothing more than its own bytes back: the
// RAM tier keeps what the ring holds, and no good ring block is dropped as
// corrupt.
func TestClientWritesDuringAReadNeverReachRAMOrTheRing(t *testing.T) {
	const blocks = 48
	o := newTestObject("scribbled.tar", blocks*testBlock)
	cfg := ringConfig(t.TempDir(), 2*blocks)
	cfg.MemorySize = 4 * blocks * testBlock
	c := openCache(t, cfg)
	putAhead(c, o.obj, 0, o.data)

	mem, f := sharedMapping(t, int(testBlock))
	junk := bytes.Repeat([]byte{0xA5}, int(testBlock))
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			f.WriteAt(junk, 0)
		}
	}()
	for i := range int64(blocks) {
		// One block at a time, so each is read straight into the mapping.
		c.ReadAt(o.obj, mem, i*testBlock, ForOneShot)
	}
	stop.Store(true)
	wg.Wait()

	if n := c.Stats().ChecksumFailures; n != 0 {
		t.Errorf("%d good ring blocks dropped as corrupt because the client wrote its buffer", n)
	}
	c.ram.settle()
	for i := range int64(blocks) {
		want := o.data[i*testBlock : (i+1)*testBlock]
		if b, _, ok := c.Get(o.obj, i, InRAM); ok && !bytes.Equal(b, want) {
			t.Fatalf("RAM tier holds the client's bytes for block %d", i)
		}
		got := make([]byte, testBlock)
		if n, ok := c.ReadAt(o.obj, got, i*testBlock, ForReadAhead); !ok || int64(n) != testBlock || !bytes.Equal(got, want) {
			t.Fatalf("block %d afterwards: ok=%v, n=%d, right bytes %v", i, ok, n, bytes.Equal(got, want))
		}
	}
}

// A READ into a mapping whose file was truncated faults. The fault must
// reach the caller as a panic it can recover (not end the process from a
// worker goroutine), and leave no slot pinned.
func TestAFaultInTheReadersBufferReachesTheCallerAndLeaksNoPin(t *testing.T) {
	const blocks = 12
	o := newTestObject("truncated.tar", blocks*testBlock)
	cfg := ringConfig(t.TempDir(), blocks)
	c := openCache(t, cfg)
	putAhead(c, o.obj, 0, o.data)

	for _, promote := range []bool{false, true} {
		for _, shift := range []int{0, 1} { // straight into the mapping, and through the bounce buffer
			mem, f := sharedMapping(t, int(blocks*testBlock+alignment))
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			dst := mem[shift : shift+int(blocks*testBlock)]
			faulted := func() (faulted bool) {
				defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
				defer func() { faulted = recover() != nil }()
				if promote {
					c.ReadAt(o.obj, dst, 0, ForOneShot)
				} else {
					c.ReadAt(o.obj, dst, 0, ForReadAhead)
				}
				return false
			}()
			if !faulted {
				t.Errorf("promote=%v shift=%d: a read into a truncated mapping did not fault", promote, shift)
			}
			r := c.liveRing()
			for n := range r.slots {
				if p := r.slots[n].pins.Load(); p != 0 {
					t.Fatalf("promote=%v shift=%d: slot %d still has %d pins after the fault", promote, shift, n, p)
				}
			}
		}
	}
	mustRead(t, c, o, 0, o.obj.Size)
	if n := c.Stats().ChecksumFailures; n != 0 {
		t.Errorf("%d ring blocks dropped because the reader's buffer faulted", n)
	}
}
