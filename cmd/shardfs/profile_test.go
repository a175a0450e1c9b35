package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func TestProfilesWrittenAtStop(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "allocs.pprof")
	t.Setenv(cpuProfileEnv, cpu)
	t.Setenv(memProfileEnv, mem)
	stop, err := startProfiles(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, p := range []string{cpu, mem} {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() == 0 {
			t.Errorf("profile %s not written (%v)", p, err)
		}
	}
}

func TestNoProfileWithoutEnv(t *testing.T) {
	t.Setenv(cpuProfileEnv, "")
	t.Setenv(memProfileEnv, "")
	stop, err := startProfiles(slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

func TestProfileBadPathIsOneError(t *testing.T) {
	t.Setenv(cpuProfileEnv, filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	if _, err := startProfiles(slog.Default()); err == nil {
		t.Fatal("a CPU profile path in a missing directory was accepted")
	}
}
