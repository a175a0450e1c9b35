package cache

import (
	"testing"
)

// BenchmarkOneShotRead8MiB: the GPU side interface's READ of 8 MiB from
// the ring into an aligned buffer (a registered /dev/shm mapping), with no
// RAM tier (blocks read straight into the buffer) and with a RAM tier that
// has room (blocks read into the daemon's memory, copied out, promoted).
func BenchmarkOneShotRead8MiB(b *testing.B) {
	for _, tc := range []struct {
		name string
		ram  int64
	}{{"ring", 0}, {"ring+promote", 1 << 40}} {
		b.Run(tc.name, func(b *testing.B) {
			const size = 8 << 20
			o := newTestObject("bench.tar", size)
			cfg := Config{Dir: b.TempDir(), Size: 64 << 20, BlockSize: 1 << 20, Namespace: "mem://bench"}
			c, err := Open(b.Context(), cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			c.Put(o.obj, 0, o.data, ForReadAhead)
			dst := alignedBuffer(size)
			b.SetBytes(size)
			for b.Loop() {
				if tc.ram > 0 {
					// A fresh tier each time, so every block is promoted.
					c.ram, _ = newMemTier(size*2, cfg.BlockSize, "", &c.stats)
				}
				if _, ok := c.ReadAt(o.obj, dst, 0, ForOneShot); !ok {
					b.Fatal("miss")
				}
			}
		})
	}
}
