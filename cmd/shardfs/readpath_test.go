package main

import (
	"context"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/prefetch"
)

// Dense random reads fetch the rest of an object only where a tier keeps it.
func TestDenseRandomNeedsACacheTier(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ram   int64
		ring  bool
		dense bool
	}{
		{"RAM tier", 64 << 20, false, true},
		{"ring only", 0, true, true},
		{"no tier", 0, false, false},
	} {
		cfg := cache.DefaultConfig()
		cfg.MemorySize = tc.ram
		if tc.ring {
			cfg.Dir, cfg.Size, cfg.SizeGiven = t.TempDir(), 64<<20, true
		}
		cc, err := cache.Open(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := newPrefetcher(prefetch.DefaultConfig(), cc, nil, nil, nil)
		if got := s.Config().DenseRandom; got != tc.dense {
			t.Errorf("%s: DenseRandom = %v, want %v", tc.name, got, tc.dense)
		}
		s.Close()
		_ = cc.Close()
	}
}
