package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProfilesWrittenAtStop(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "allocs.pprof"), filepath.Join(dir, "trace.out")
	t.Setenv(cpuProfileEnv, cpu)
	t.Setenv(memProfileEnv, mem)
	t.Setenv(traceEnv, tr)
	stop, err := startProfiles(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, p := range []string{cpu, mem, tr} {
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
	if _, err := startProfiles(slog.Default()); err == nil || !strings.Contains(err.Error(), cpuProfileEnv) {
		t.Fatalf("a CPU profile path in a missing directory: err %v, want one naming %s", err, cpuProfileEnv)
	}
}

// A bad trace path after a good CPU profile stops the CPU profile: a
// second start would fail if it were left running.
func TestABadTracePathLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(cpuProfileEnv, filepath.Join(dir, "cpu.pprof"))
	t.Setenv(traceEnv, filepath.Join(dir, "missing", "trace.out"))
	if _, err := startProfiles(slog.Default()); err == nil || !strings.Contains(err.Error(), traceEnv) {
		t.Fatalf("a trace path in a missing directory: err %v, want one naming %s", err, traceEnv)
	}
	t.Setenv(traceEnv, filepath.Join(dir, "trace.out"))
	stop, err := startProfiles(slog.Default())
	if err != nil {
		t.Fatalf("profiles could not start again after a failed start: %v", err)
	}
	stop()
}
