// Package cachetest holds what the tests of the cache packages share: a
// child process of the test binary that says when it is ready (the crash
// tests kill it), a file patched in place (the corruption tests), the
// check that an opened whole-shard file holds a shard's bytes, and a log
// the tests read back.
//
// It is for tests only and never holds a test of its own.
package cachetest

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// StartChild runs this test binary as a child, running no test, with env
// added, and waits for it to print "ready". The test binary's TestMain
// sees env and plays the child's part.
func StartChild(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), env...)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}
	return child
}

// PatchFile writes p at off of the file at path, in place.
func PatchFile(t *testing.T, path string, off int64, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// LogRecorder collects log lines so tests can count warnings.
type LogRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Logger is a logger at debug level that writes to l.
func (l *LogRecorder) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Count is how many lines were logged at level ("WARN", "INFO", ...).
func (l *LogRecorder) Count(level string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "level="+level)
}

func (l *LogRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// MustHold fails the test unless the open of key's whole-shard file
// succeeded (ok) and f holds exactly want; it closes f.
func MustHold(t *testing.T, f *os.File, ok bool, key string, want []byte) {
	t.Helper()
	if !ok {
		t.Fatalf("%s: no whole-shard file", key)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: whole-shard file holds %d bytes (%v), not the shard's %d", key, len(got), err, len(want))
	}
}
