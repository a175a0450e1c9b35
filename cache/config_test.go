package cache

import (
	"strings"
	"testing"
)

func TestConfigDefaultsAreValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	if cfg.Size != DefaultSize || cfg.BlockSize != DefaultBlockSize || cfg.MemorySize != DefaultMemorySize {
		t.Fatalf("DefaultConfig = %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(defaults) = %v", err)
	}
	off := DefaultConfig()
	off.MemorySize = 0
	if err := off.Validate(); err != nil {
		t.Fatalf("MemorySize 0 (RAM tier off) rejected: %v", err)
	}
}

func TestConfigRejectsNonsenseSizes(t *testing.T) {
	base := Config{Dir: "/x", Size: 1 << 30, BlockSize: 1 << 20}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"block not 4K multiple", func(c *Config) { c.BlockSize = 1000 }, "block size 1000"},
		{"negative block", func(c *Config) { c.BlockSize = -4096 }, "block size -4096"},
		{"huge block", func(c *Config) { c.BlockSize = 1 << 30 }, "at most"},
		{"negative memory", func(c *Config) { c.MemorySize = -1 }, "memory cache size -1"},
		{"negative size", func(c *Config) { c.Size = -5 }, "cache size -5"},
		{"ring smaller than two blocks", func(c *Config) { c.Size = 1 << 20 }, "at least 2 blocks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate(%+v) = %v, want an error containing %q", cfg, err, tc.want)
			}
		})
	}
	small := base
	small.Dir, small.Size = "", 1
	if err := small.Validate(); err != nil {
		t.Fatalf("a RAM-only config needs no ring size: %v", err)
	}
}
