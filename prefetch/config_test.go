package prefetch

import "testing"

func TestConfigDefaults(t *testing.T) {
	got := DefaultConfig()
	want := Config{BlockSize: 1 << 20, PartSize: 8 << 20, MaxPrefetch: 256 << 20, Memory: 1 << 30,
		Concurrency: 64, NextShards: 1, ReorderWindow: 16 << 20, HeadSize: 16 << 10, DenseRandom: true, SkipLaggingSink: true}
	if got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if got := DefaultConfig().WithBlockSize(3 << 20).PartSize; got != 6<<20 {
		t.Fatalf("default part size with 3 MiB blocks = %d, want the largest multiple under 8 MiB", got)
	}
	off := DefaultConfig()
	off.NextShards, off.HeadSize = 0, 0
	if err := off.Validate(); err != nil {
		t.Fatalf("NextShards and HeadSize 0 (off) rejected: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := DefaultConfig()
	cases := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"part not a multiple of block", func(c *Config) { c.PartSize = 3 << 20; c.BlockSize = 2 << 20 },
			"part size 3.0 MiB is not a multiple of block size 2.0 MiB"},
		{"negative block", func(c *Config) { c.BlockSize = -4096 }, "block size -4096 bytes must be positive"},
		{"memory below a part", func(c *Config) { c.Memory = 4 << 20 },
			"prefetch memory 4.0 MiB is smaller than part size 8.0 MiB"},
		{"window below a block", func(c *Config) { c.MaxPrefetch = 1000 },
			"max prefetch 1000 B is smaller than block size 1.0 MiB"},
		{"no concurrency", func(c *Config) { c.Concurrency = -1 }, "prefetch concurrency -1 must be positive"},
		{"negative reorder window", func(c *Config) { c.ReorderWindow = -1 << 30 }, "reorder window -1073741824 bytes must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.change(&c)
			err := c.Validate()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
