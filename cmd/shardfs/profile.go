package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiling is for benchmarks, not for users: two environment variables,
// no flags and no server. SHARDFS_CPUPROFILE=FILE records a CPU profile
// from mount to unmount; SHARDFS_MEMPROFILE=FILE writes the allocation
// profile (every allocation since start, and what is live) at unmount.
const (
	cpuProfileEnv = "SHARDFS_CPUPROFILE"
	memProfileEnv = "SHARDFS_MEMPROFILE"
)

// startProfiles starts what the environment asks for and returns the
// function that stops it and writes the files.
func startProfiles(log *slog.Logger) (stop func(), err error) {
	var cpu *os.File
	if path := os.Getenv(cpuProfileEnv); path != "" {
		if cpu, err = os.Create(path); err != nil {
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
	}
	memPath := os.Getenv(memProfileEnv)
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if memPath == "" {
			return
		}
		f, err := os.Create(memPath)
		if err == nil {
			runtime.GC() // the live figures as of now
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			log.Warn("memory profile", "path", memPath, "err", err)
		}
	}, nil
}
