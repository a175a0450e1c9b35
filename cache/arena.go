package cache

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

// arena is the RAM tier's memory when the tier is shared: one file in a
// shared-memory directory (/dev/shm), mapped by the daemon and cut into
// block-sized slots. A GPU client that leases a slot maps the same file
// and registers it with CUDA, so the GPU copies the block straight out of
// the tier: one trip through host memory, where a READ into the client's
// buffer and a copy from there make three.
//
// A slot is live while the tier's index (ristretto) holds it. Eviction
// marks it dead; it is reused only once no pin holds it, so neither a
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
type arena struct {
	path string
	mem  []byte
	bs   int64

	mu     sync.Mutex
	slots  []arenaSlot
	free   []int32
	leased int // slots pinned by leases (pinLease), at most half the slots
}

type arenaSlot struct {
	gen  uint32
	pins int32
	live bool
}

// arenaRef names one allocation of a slot.
type arenaRef struct {
	slot int32
	gen  uint32
}

// ErrSharedMemory marks a shared RAM tier that could not be made: a full
// or missing directory, a mapping refused.
var ErrSharedMemory = errors.New("shared memory cache")

// arenaPrefix starts every arena file's name; the daemon's pid follows.
const arenaPrefix = "shardfs-ram."

func openArena(dir string, size, blockSize int64) (*arena, error) {
	n := size / blockSize
	if n < 1 || n > 1<<31-1 {
		return nil, fmt.Errorf("%w of %d bytes: must hold 1 to 2^31 blocks of %d bytes", ErrSharedMemory, size, blockSize)
	}
	removeStaleArenas(dir)
	path := filepath.Join(dir, arenaPrefix+strconv.Itoa(os.Getpid()))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSharedMemory, err)
	}
	defer f.Close()
	fail := func(err error) (*arena, error) {
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
	a := &arena{path: path, mem: mem, bs: blockSize, slots: make([]arenaSlot, n), free: make([]int32, n)}
	for i := range a.free {
		a.free[i] = int32(n) - 1 - int32(i) // slot 0 first: the file's start
	}
	return a, nil
}

// removeStaleArenas removes the arena files in dir of daemons no longer
// running.
func removeStaleArenas(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, arenaPrefix+"*"))
	for _, name := range names {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(name), arenaPrefix))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			os.Remove(name)
		}
	}
}

// block is slot ref's memory, n bytes of it.
func (a *arena) block(ref arenaRef, n int64) []byte {
	at := int64(ref.slot) * a.bs
	return a.mem[at : at+n : at+a.bs]
}

// offset is where ref's slot starts in the file.
func (a *arena) offset(ref arenaRef) int64 { return int64(ref.slot) * a.bs }

// alloc takes a free slot, live from now on; false when every slot is
// live or pinned.
func (a *arena) alloc() (arenaRef, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) == 0 {
		return arenaRef{}, false
	}
	s := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	st := &a.slots[s]
	st.gen++
	st.live = true
	return arenaRef{slot: s, gen: st.gen}, true
}

// release ends ref's allocation: the index no longer holds it. The slot is
// free once no pin holds it.
func (a *arena) release(ref arenaRef) {
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

// pin keeps ref's slot from reuse until unpin; false when the slot was
// released (or reused) since ref was handed out.
func (a *arena) pin(ref arenaRef) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pinLocked(ref)
}

func (a *arena) pinLocked(ref arenaRef) bool {
	st := &a.slots[ref.slot]
	if st.gen != ref.gen || !st.live {
		return false
	}
	st.pins++
	return true
}

func (a *arena) unpin(ref arenaRef) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unpinLocked(ref)
}

func (a *arena) unpinLocked(ref arenaRef) {
	st := &a.slots[ref.slot]
	st.pins--
	if st.pins == 0 && !st.live {
		a.free = append(a.free, ref.slot)
	}
}

// pinLease pins refs for a lease, from the first on, and returns those it
// pinned: it stops at one released since it was looked up, and where leases
// would pin more than half the slots (the other half keeps caching while
// clients hold leases).
func (a *arena) pinLease(refs []arenaRef) []arenaRef {
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

func (a *arena) unpinLease(refs []arenaRef) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ref := range refs {
		a.unpinLocked(ref)
	}
	a.leased -= len(refs)
}

// close unmaps the arena and removes its file. Callers make sure nothing
// reads it any more (Cache.Close holds the life lock); pins may still be
// dropped afterwards, which touches no memory. A client's own mapping
// outlives the file.
func (a *arena) close() {
	unix.Munmap(a.mem)
	a.mem = nil
	os.Remove(a.path)
}
