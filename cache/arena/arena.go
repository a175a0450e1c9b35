// Package arena owns the memory of a shared RAM tier: one file in a
// shared-memory directory (/dev/shm), mapped and cut into block-sized
// slots that a GPU client can map too, with each slot's life (allocated,
// released, pinned by a reader or a lease) and the file's (reserved whole
// at Open, removed at Close, a dead daemon's removed by the next Open).
//
// It never knows what a slot holds: the RAM tier's index (package cache)
// says which block lies in which slot, and when a slot is released.
package arena

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// Arena is the RAM tier's memory when the tier is shared: one file in a
// shared-memory directory (/dev/shm), mapped by the daemon and cut into
// block-sized slots. A GPU client that leases a slot maps the same file
// and registers it with CUDA, so the GPU copies the block straight out of
// the tier: one trip through host memory, where a READ into the client's
// buffer and a copy from there make three.
//
// A slot is live from Alloc until Release: while the tier's index holds
// its block (eviction releases it). It is reused only once no pin holds it, so neither a
// reader copying out of it nor a client's DMA ever sees another block's
// bytes. Every allocation bumps the slot's generation, and a pin names the
// generation it expects: a reader that found a slot in the index just
// before it was evicted and reused gets a miss, not the new block.
//
// The file is 0600 (the daemon's uid and root, like the cache dir's
// files), reserved whole at open with fallocate so that a full /dev/shm
// fails the open rather than a later write, and removed at close. A file
// left by a daemon that died is removed by the next one that opens an
// arena in the same directory.
type Arena struct {
	path string
	mem  []byte
	bs   int64

	mu     sync.Mutex
	slots  []slot
	free   []int32
	leased int // slots pinned by leases (PinLease), at most half the slots
}

type slot struct {
	gen  uint32
	pins int32
	live bool
}

// Ref names one allocation of a slot.
type Ref struct {
	slot int32
	gen  uint32
}

// ErrSharedMemory marks a shared RAM tier that could not be made: a full
// or missing directory, a mapping refused.
var ErrSharedMemory = errors.New("shared memory cache")

// filePrefix starts every arena file's name; the daemon's pid follows.
const filePrefix = "shardfs-ram."

// Open makes and maps the arena file of size bytes, cut into slots of
// blockSize, in dir, after removing the files of daemons no longer
// running there. It fails with ErrSharedMemory when the file cannot be
// reserved whole or mapped, and then leaves nothing behind.
func Open(dir string, size, blockSize int64) (*Arena, error) {
	n := size / blockSize
	if n < 1 || n > 1<<31-1 {
		return nil, fmt.Errorf("%w of %d bytes: must hold 1 to 2^31 blocks of %d bytes", ErrSharedMemory, size, blockSize)
	}
	removeStaleArenas(dir)
	path := filepath.Join(dir, filePrefix+strconv.Itoa(os.Getpid()))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSharedMemory, err)
	}
	defer f.Close()
	fail := func(err error) (*Arena, error) {
		os.Remove(path)
		return nil, fmt.Errorf("%w %s (%s): %w", ErrSharedMemory, path, humanize.IBytes(uint64(n*blockSize)), err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n*blockSize); err != nil {
		return fail(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(n*blockSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	a := &Arena{path: path, mem: mem, bs: blockSize, slots: make([]slot, n), free: make([]int32, n)}
	for i := range a.free {
		a.free[i] = int32(n) - 1 - int32(i) // slot 0 first: the file's start
	}
	return a, nil
}

// removeStaleArenas removes the arena files in dir of daemons no longer
// running.
func removeStaleArenas(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, filePrefix+"*"))
	for _, name := range names {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(name), filePrefix))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			os.Remove(name)
		}
	}
}

// Block is slot ref's memory, n bytes of it.
func (a *Arena) Block(ref Ref, n int64) []byte {
	at := int64(ref.slot) * a.bs
	return a.mem[at : at+n : at+a.bs]
}

// Offset is where ref's slot starts in the file.
func (a *Arena) Offset(ref Ref) int64 { return int64(ref.slot) * a.bs }

// Alloc takes a free slot, live from now on; false when every slot is
// live or pinned.
func (a *Arena) Alloc() (Ref, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) == 0 {
		return Ref{}, false
	}
	s := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	st := &a.slots[s]
	st.gen++
	st.live = true
	return Ref{slot: s, gen: st.gen}, true
}

// Release ends ref's allocation: the index no longer holds it. The slot is
// free once no pin holds it.
func (a *Arena) Release(ref Ref) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := &a.slots[ref.slot]
	if st.gen != ref.gen || !st.live {
		return
	}
	st.live = false
	if st.pins == 0 {
		a.free = append(a.free, ref.slot)
	}
}

// Pin keeps ref's slot from reuse until Unpin; false when the slot was
// released (or reused) since ref was handed out.
func (a *Arena) Pin(ref Ref) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pinLocked(ref)
}

func (a *Arena) pinLocked(ref Ref) bool {
	st := &a.slots[ref.slot]
	if st.gen != ref.gen || !st.live {
		return false
	}
	st.pins++
	return true
}

func (a *Arena) Unpin(ref Ref) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unpinLocked(ref)
}

func (a *Arena) unpinLocked(ref Ref) {
	st := &a.slots[ref.slot]
	st.pins--
	if st.pins == 0 && !st.live {
		a.free = append(a.free, ref.slot)
	}
}

// PinLease pins refs for a lease, from the first on, and returns those it
// pinned: it stops at one released since it was looked up, and where leases
// would pin more than half the slots (the other half keeps caching while
// clients hold leases).
func (a *Arena) PinLease(refs []Ref) []Ref {
	a.mu.Lock()
	defer a.mu.Unlock()
	refs = refs[:min(len(refs), max(len(a.slots)/2-a.leased, 0))]
	for i, ref := range refs {
		if !a.pinLocked(ref) {
			refs = refs[:i]
			break
		}
	}
	a.leased += len(refs)
	return refs
}

func (a *Arena) UnpinLease(refs []Ref) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ref := range refs {
		a.unpinLocked(ref)
	}
	a.leased -= len(refs)
}

// Close unmaps the arena and removes its file. Callers make sure nothing
// reads it any more (the cache's Close holds its life lock); pins may still be
// dropped afterwards, which touches no memory. A client's own mapping
// outlives the file.
func (a *Arena) Close() {
	unix.Munmap(a.mem)
	a.mem = nil
	os.Remove(a.path)
}

// Path is the arena file, which a client maps.
func (a *Arena) Path() string { return a.path }

// Slots is how many blocks the arena holds.
func (a *Arena) Slots() int { return len(a.slots) }

// BlockSize is the size of each slot.
func (a *Arena) BlockSize() int64 { return a.bs }

// Free is how many slots are free to allocate: neither live nor pinned.
func (a *Arena) Free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.free)
}

// Leased is how many slots leases pin.
func (a *Arena) Leased() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leased
}
