package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A daemonized mount's terminal is its parent's, which waits on the ready
// pipe. What the user must see before the command returns goes through
// that pipe: the warnings that change what the mount does, printed once
// the mount is ready, and the one line saying why it failed (fusermount's
// own reason among them). Everything else goes to the log only: retries
// and other progress of a mount still trying, and the warnings of a mount
// that failed.

// maxTerminalWarnings bounds the warnings one mount prints at start: a
// listing with thousands of unshowable keys says so in a few lines.
const maxTerminalWarnings = 10

// EffectKey marks a warning that changes what the mount does (a smaller
// ring, a key not shown): its value says how. Such warnings logged before a
// daemonized mount is ready are printed on the terminal too when it comes
// up; others (a GET being retried) stay in the log. Packages use the
// literal "effect".
const EffectKey = "effect"

// terminalWarnings is a slog.Handler that also sends each warning with an
// EffectKey attribute, logged before the mount is ready, to the ready pipe,
// as one line.
type terminalWarnings struct {
	slog.Handler
	ready *readyReporter
}

func (h terminalWarnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && hasEffect(r) {
		var line strings.Builder
		line.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&line, " %s=%s", a.Key, a.Value)
			return true
		})
		h.ready.warn(line.String())
	}
	return h.Handler.Handle(ctx, r)
}

func hasEffect(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == EffectKey
		return !found
	})
	return found
}

func (h terminalWarnings) WithAttrs(as []slog.Attr) slog.Handler {
	return terminalWarnings{h.Handler.WithAttrs(as), h.ready}
}

func (h terminalWarnings) WithGroup(name string) slog.Handler {
	return terminalWarnings{h.Handler.WithGroup(name), h.ready}
}

// warningPrefix marks a warning line on the ready pipe.
const warningPrefix = "warning: "

// warn sends one warning line to the waiting parent; nothing once the
// mount is ready or failed, or past maxTerminalWarnings.
func (r *readyReporter) warn(line string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	r.warned++
	switch {
	case r.warned <= maxTerminalWarnings:
		fmt.Fprintln(r.f, warningPrefix+strings.ReplaceAll(line, "\n", " "))
	case r.warned == maxTerminalWarnings+1:
		fmt.Fprintln(r.f, warningPrefix+"more warnings in the log")
	}
}

// captureStderr runs fn with the process's stderr (fd 2) going into a pipe,
// copies what arrives on to the real stderr, and returns it too. go-fuse
// runs fusermount with the daemon's stderr, where its reason for failing
// ("fusermount3: failed to open /dev/fuse: Permission denied") would
// otherwise only reach the log.
func captureStderr(fn func() error) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", fn()
	}
	saved, err := unix.Dup(2)
	if err != nil {
		r.Close()
		w.Close()
		return "", fn()
	}
	if err := unix.Dup3(int(w.Fd()), 2, 0); err != nil {
		unix.Close(saved)
		r.Close()
		w.Close()
		return "", fn()
	}
	w.Close()
	realStderr := os.NewFile(uintptr(saved), "stderr")
	var got bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(io.MultiWriter(&got, realStderr), r)
	}()
	ferr := fn()
	// Putting the real stderr back closes the pipe's last write end (the
	// fusermount child has exited), which ends the copy.
	_ = unix.Dup3(saved, 2, 0)
	wg.Wait()
	r.Close()
	realStderr.Close()
	return got.String(), ferr
}

// fusermountReason is the last line fusermount wrote ("/usr/bin/fusermount3:
// failed to open /dev/fuse: Permission denied"), its program named without
// the directory, or "".
func fusermountReason(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		prog, reason, ok := strings.Cut(strings.TrimSpace(lines[i]), ": ")
		if ok && strings.HasPrefix(filepath.Base(prog), "fusermount") {
			return filepath.Base(prog) + ": " + reason
		}
	}
	return ""
}
