package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// Profiling is for benchmarks, not for users: environment variables, no
// flags and no server. SHARDFS_CPUPROFILE=FILE records a CPU profile from
// mount to unmount; SHARDFS_MEMPROFILE=FILE writes the allocation profile
// (every allocation since start, and what is live) at unmount;
// SHARDFS_TRACE=FILE records an execution trace (`go tool trace`) from
// mount to unmount, which shows what a CPU profile cannot: where reads and
// GETs wait, and for whom.
const (
	cpuProfileEnv = "SHARDFS_CPUPROFILE"
	memProfileEnv = "SHARDFS_MEMPROFILE"
	traceEnv      = "SHARDFS_TRACE"
)

// recorder is one kind of profile: started with its file open when the
// mount starts, stopped (and its file written) at unmount.
type recorder struct {
	env   string
	start func(f *os.File) error
	stop  func(f *os.File) error
}

var recorders = []recorder{
	{env: cpuProfileEnv,
		start: func(f *os.File) error { return pprof.StartCPUProfile(f) },
		stop:  func(*os.File) error { pprof.StopCPUProfile(); return nil }},
	{env: memProfileEnv,
		start: func(*os.File) error { return nil },
		stop: func(f *os.File) error {
			runtime.GC() // the live figures as of now
			return pprof.Lookup("allocs").WriteTo(f, 0)
		}},
	{env: traceEnv,
		start: func(f *os.File) error { return trace.Start(f) },
		stop:  func(*os.File) error { trace.Stop(); return nil }},
}

// startProfiles starts what the environment asks for and returns the
// function that stops it and writes the files. A file that cannot be made
// is one error, and nothing is left running.
func startProfiles(log *slog.Logger) (stop func(), err error) {
	type running struct {
		recorder
		f *os.File
	}
	var started []running
	stopAll := func() {
		for _, r := range started {
			if err := errors.Join(r.stop(r.f), r.f.Close()); err != nil {
				log.Warn("profile", "env", r.env, "path", r.f.Name(), "err", err)
			}
		}
	}
	for _, r := range recorders {
		path := os.Getenv(r.env)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err == nil {
			if err = r.start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("%s: %w", r.env, err)
		}
		started = append(started, running{r, f})
	}
	return stopAll, nil
}
