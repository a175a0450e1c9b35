package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// Writers stream objects into a ring small enough to wrap constantly while
// readers read and lease them. Whatever is served must be right.
func TestConcurrentReadersWritersAndLeases(t *testing.T) {
	for name, mem := range map[string]int64{"ring only": 0, "ram and ring": 256 << 10} {
		t.Run(name, func(t *testing.T) {
			cfg := ringConfig(t.TempDir(), 24)
			cfg.MemorySize = mem
			c := openCache(t, cfg)
			objs := manyObjects("race", 16)

			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 6 {
						for i := w; i < len(objs); i += 4 {
							objs[i].putAll(c, int64(1+round%3))
						}
					}
				}()
			}
			for r := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(r), 99))
					for range 400 {
						o := objs[rng.IntN(len(objs))]
						off := rng.Int64N(o.obj.Size)
						n := 1 + rng.Int64N(2*testBlock)
						if r%3 == 0 {
							if err := checkLease(c, o, off, n); err != nil {
								errs <- err
								return
							}
							continue
						}
						p := make([]byte, n)
						if got, ok := c.ReadAt(o.obj, p, off, ForReadAhead); ok && !bytes.Equal(p[:got], o.data[off:off+int64(got)]) {
							errs <- fmt.Errorf("%s at %d: wrong bytes", o.obj.Key, off)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			st := c.Stats()
			if st.ChecksumFailures != 0 || st.Leases != 0 || st.RingBytes > 24*testBlock {
				t.Fatalf("after the run: %+v", st)
			}
			for _, o := range objs {
				o.putAll(c, 3)
			}
			mustRead(t, c, objs[len(objs)-1], 0, objs[len(objs)-1].obj.Size)
		})
	}
}

// checkLease leases a range, if it is cached, and checks the ring bytes.
func checkLease(c *Cache, o testObject, off, n int64) error {
	l, err := c.Lease(o.obj, off, n)
	if err != nil {
		return nil // not cached right now: fine
	}
	defer l.Release()
	var got []byte
	for _, e := range l.Extents() {
		buf := alignedBuffer(int(alignUp(e.Length + e.Offset%alignment)))
		start := e.Offset - e.Offset%alignment
		if err := c.ring.file.readFull(buf, start); err != nil {
			return err
		}
		got = append(got, buf[e.Offset-start:e.Offset-start+e.Length]...)
	}
	if want := o.data[off:min(off+n, o.obj.Size)]; !bytes.Equal(got, want) {
		return fmt.Errorf("lease of %s at %d: extent bytes differ", o.obj.Key, off)
	}
	return nil
}
