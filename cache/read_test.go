package cache

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Blocks are read concurrently, as many at once as the bound allows and no
// more, each exactly once. The reads run in a synctest bubble and each
// takes a millisecond of the bubble's clock, which moves only once every
// goroutine waits: by then every read the bound lets start has started, so
// the most in flight at once is the bound, exactly.
func TestBlocksAreReadConcurrentlyWithinABound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu                sync.Mutex
			seen              = map[int64]int{}
			inFlight, maxSeen atomic.Int64
		)
		ok := readBlocksConcurrently(3, 40, func(index int64) bool {
			n := inFlight.Add(1)
			for {
				m := maxSeen.Load()
				if n <= m || maxSeen.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			mu.Lock()
			seen[index]++
			mu.Unlock()
			inFlight.Add(-1)
			return true
		})
		if !ok {
			t.Fatal("every block read, but the read failed")
		}
		for i := int64(3); i <= 40; i++ {
			if seen[i] != 1 {
				t.Fatalf("block %d read %d times, want once (all: %v)", i, seen[i], seen)
			}
		}
		if len(seen) != 38 {
			t.Fatalf("read %d blocks, want 38: %v", len(seen), seen)
		}
		if m := maxSeen.Load(); m != ringReadsInFlight {
			t.Fatalf("at most %d blocks in flight, want %d", m, ringReadsInFlight)
		}
	})
}

// Block 5 fails at once, while the blocks beside it take 50 ms: the read
// returns only after every block read it started has returned, and starts
// none after block 5's failure but the one waiting for the slot block 5
// freed. The reads run in a synctest bubble, whose clock moves only once
// every goroutine waits: no 50 ms read can end before block 5 has failed
// and the loop has seen it, however the engine orders them.
func TestAFailedBlockFailsTheReadAfterTheOthersReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started, finished atomic.Int64
		ok := readBlocksConcurrently(0, 1000, func(index int64) bool {
			started.Add(1)
			defer finished.Add(1)
			if index == 5 {
				return false
			}
			time.Sleep(50 * time.Millisecond)
			return true
		})
		if ok {
			t.Fatal("block 5 failed, but the read succeeded")
		}
		if s, f := started.Load(), finished.Load(); s != f {
			time.Sleep(time.Second) // of the bubble's clock: the stray reads end before the bubble does
			t.Fatalf("returned with %d of %d block reads still running", s-f, s)
		}
		if s := started.Load(); s > ringReadsInFlight+1 {
			t.Fatalf("%d block reads started; want at most %d, the first window and the one waiting for the slot block 5 freed", s, ringReadsInFlight+1)
		}
	})
}

func TestOneShotReadsFillFreeRAMAndEvictNothing(t *testing.T) {
	o := newTestObject("oneshot.tar", 6*testBlock)
	cfg := ringConfig(t.TempDir(), 32)
	cfg.MemorySize = 4 * testBlock
	c := openCache(t, cfg)
	putAhead(c, o.obj, 0, o.data) // the ring alone holds it
	inRAM := func() (n int) {
		c.ram.settle()
		for i := range int64(6) {
			if _, _, ok := c.Get(o.obj, i, InRAM); ok {
				n++
			}
		}
		return n
	}

	p := alignedBuffer(int(o.obj.Size))
	if n, ok := c.ReadAt(o.obj, p, 0, ForReadAhead); !ok || n != len(o.data) || !bytes.Equal(p, o.data) {
		t.Fatalf("ReadAt = %d, %v, or wrong bytes", n, ok)
	}
	if n := inRAM(); n != 0 {
		t.Fatalf("ReadAt put %d blocks in RAM; it promotes nothing", n)
	}

	// Two blocks' room taken by another object, the rest by the read.
	other := newTestObject("other.tar", 2*testBlock)
	other.putAll(c, 1)
	c.ram.settle()
	shifted := make([]byte, len(o.data)+1)[1:] // the bounce-buffer way too
	for _, dst := range [][]byte{p, shifted} {
		if n, ok := c.ReadAt(o.obj, dst, 0, ForOneShot); !ok || n != len(o.data) || !bytes.Equal(dst, o.data) {
			t.Fatalf("ReadAt ForOneShot = %d, %v, or wrong bytes", n, ok)
		}
	}
	if n := inRAM(); n != 2 {
		t.Fatalf("%d blocks promoted into a RAM tier with room for 2", n)
	}
	for i := range int64(2) {
		if _, _, ok := c.Get(other.obj, i, InRAM); !ok {
			t.Fatalf("block %d of another object was evicted for a one-shot read", i)
		}
	}
	if _, ok := c.ReadAt(o.obj, p[:testBlock], 0, ForOneShot); !ok {
		t.Fatal("a read served from RAM failed")
	}
}

// A cold random reader asks the cache first for every block it reads; a
// miss must not cost a block-sized buffer, or each 4 KiB read pays for
// zeroing a whole block it then throws away.
func TestAMissAllocatesNoBlock(t *testing.T) {
	const bs = 64 * alignment // big enough that one buffer stands out
	o := newTestObject("miss.tar", 4*bs)
	cfg := Config{Dir: t.TempDir(), Size: geometry{blockSize: bs, slots: 8}.fileSize(), BlockSize: bs, MemorySize: 8 * bs}
	c := openCache(t, cfg)
	p := make([]byte, 4096)
	miss := func() {
		if _, _, ok := c.Get(o.obj, 1, InRAM|InRing); ok {
			t.Fatal("Get served a block nobody put")
		}
		if _, ok := c.ReadAt(o.obj, p, bs+100, ForRandomRead); ok {
			t.Fatal("ReadAt served a block nobody put")
		}
	}
	miss() // warms whatever is made once
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const misses = 20
	for range misses {
		miss()
	}
	runtime.ReadMemStats(&after)
	if perMiss := (after.TotalAlloc - before.TotalAlloc) / misses; perMiss >= uint64(bs/4) {
		t.Fatalf("a miss allocated %d bytes; a block is %d", perMiss, bs)
	}
	// And a hit still reads what was put.
	c.Put(o.obj, 1, o.data[bs:2*bs], ForReadAhead)
	if b, _, ok := c.Get(o.obj, 1, InRing); !ok || !bytes.Equal(b, o.data[bs:2*bs]) {
		t.Fatal("Get of a block in the ring missed or served wrong bytes")
	}
	if _, ok := c.ReadAt(o.obj, p, bs+100, ForRandomRead); !ok || !bytes.Equal(p, o.data[bs+100:bs+100+4096]) {
		t.Fatal("ReadAt of a block in the ring missed or served wrong bytes")
	}
}
