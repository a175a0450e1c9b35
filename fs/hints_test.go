package fs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// hintRecorder is a ReadPath that keeps the hinted keys and scheduled
// ranges; its schedule refuses ranges past full and reports every range
// of an object named "overlap.tar" as overlapping.
type hintRecorder struct {
	ReadPath
	mu     sync.Mutex
	keys   []string
	ranges []string
	full   int
}

func (h *hintRecorder) Schedule(owner uint64, ranges []ScheduledRange) ScheduleResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	res := ScheduleResult{FirstOverlapping: -1, FirstFull: -1}
	for i, r := range ranges {
		switch {
		case h.full > 0 && len(h.ranges) >= h.full:
			if res.Full == 0 {
				res.FirstFull = i
			}
			res.Full++
		case r.Obj.Key == "overlap.tar":
			if res.Overlapping == 0 {
				res.FirstOverlapping = i
			}
			res.Overlapping++
		default:
			h.ranges = append(h.ranges, fmt.Sprintf("%d:%s@%d+%d", owner, r.Obj.Key, r.Off, r.Len))
		}
	}
	return res
}

func (h *hintRecorder) Hint(objs ...store.Object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range objs {
		h.keys = append(h.keys, o.Key)
	}
}

// lockedBuffer is a log destination tests can read while the mount writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hintsMount is the part of a mount the hints file uses.
func hintsMount(keys ...string) (*mountState, *hintRecorder, *lockedBuffer) {
	rec := &hintRecorder{}
	logs := &lockedBuffer{}
	m := &mountState{
		opts: Options{ReadPath: rec, MountPoint: "/mnt/data", Log: slog.New(slog.NewTextHandler(logs, nil))},
	}
	var objs []store.Object
	for _, k := range keys {
		objs = append(objs, store.Object{Key: k, Size: 1 << 20})
	}
	m.current.Store(m.build(objs))
	return m, rec, logs
}

func TestHintsNameFilesByRelativeOrAbsolutePath(t *testing.T) {
	m, rec, _ := hintsMount("a.tar", "d/b.tar")
	h := &hintsHandle{m: m}
	for _, w := range []string{"a.tar\n /mnt/data/d/b.", "tar \n\n", "/a.tar"} {
		if n, errno := h.Write(context.Background(), []byte(w), 0); errno != 0 || int(n) != len(w) {
			t.Fatalf("write %q: %d, %v", w, n, errno)
		}
	}
	h.Flush(context.Background())
	if got := strings.Join(rec.keys, ","); got != "a.tar,d/b.tar,a.tar" {
		t.Fatalf("hinted %s", got)
	}
}

// A writer that never sends a newline (head -c 300M /dev/zero > hints)
// is refused once its line passes the cap, and the daemon keeps nothing
// of it; the same handle then takes good lines again.
func TestHintsRefuseALineLongerThanTheCap(t *testing.T) {
	m, rec, _ := hintsMount("a.tar")
	h := &hintsHandle{m: m}
	chunk := make([]byte, 128<<10)
	var errno syscall.Errno
	written := 0
	for written < 300<<20 && errno == 0 {
		_, errno = h.Write(context.Background(), chunk, int64(written))
		written += len(chunk)
		if len(h.partial) > HintLineMax {
			t.Fatalf("%d bytes of an unfinished line kept, cap %d", len(h.partial), HintLineMax)
		}
	}
	if errno != syscall.E2BIG {
		t.Fatalf("300 MiB without a newline: %v after %d bytes, want E2BIG", errno, written)
	}
	if len(h.partial) != 0 {
		t.Fatalf("%d bytes kept after the refusal", len(h.partial))
	}
	// A line over the cap in the middle of a write is refused too, rather
	// than silently dropping the lines after it.
	w := "a.tar\n" + strings.Repeat("x", 70<<10) + "\na.tar\n"
	if _, errno := h.Write(context.Background(), []byte(w), 0); errno != syscall.E2BIG {
		t.Fatalf("a 70 KiB line: %v, want E2BIG", errno)
	}
	if _, errno := h.Write(context.Background(), []byte("a.tar\n"), 0); errno != 0 {
		t.Fatal(errno)
	}
	if len(rec.keys) != 1 {
		t.Fatalf("hinted %v, want the one good line after the refusals", rec.keys)
	}
	if got := m.hints.stats(); got.Refused != 2 || got.Lines != 1 {
		t.Fatalf("stats %+v, want 2 refused writes and 1 line", got)
	}
}

// 200,000 lines naming no file are counted, and logged as a summary, not
// line by line (they once wrote 17.8 MB of warnings).
func TestHintsNamingNoFileAreCountedAndLoggedOnce(t *testing.T) {
	m, _, logs := hintsMount("a.tar")
	h := &hintsHandle{m: m}
	var w bytes.Buffer
	for i := range 200_000 {
		fmt.Fprintf(&w, "no/such/shard-%06d.tar\n", i)
		if w.Len() > 120<<10 || i == 199_999 {
			if _, errno := h.Write(context.Background(), w.Bytes(), 0); errno != 0 {
				t.Fatal(errno)
			}
			w.Reset()
		}
	}
	if got := m.hints.stats().Unknown; got != 200_000 {
		t.Fatalf("%d unknown lines counted, want 200000", got)
	}
	if n := strings.Count(logs.String(), "\n"); n > 2 || n == 0 {
		t.Fatalf("%d log lines for 200,000 unknown hints, want 1 or 2:\n%.500s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "no/such/shard-000000.tar") {
		t.Fatalf("the warning does not name an example: %s", logs.String())
	}
}

// FuzzSplitHints: whatever a client writes, in whatever pieces, the lines
// and the rest are exactly its bytes, none longer than the cap, or the
// write is refused and nothing is kept.
func FuzzSplitHints(f *testing.F) {
	f.Add([]byte("a.tar\nb.tar"), []byte("\n/mnt/data/c.tar\n"))
	f.Add(bytes.Repeat([]byte("x"), HintLineMax), []byte("y\n"))
	f.Add([]byte("\n\n\n"), []byte(""))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var got [][]byte
		var partial []byte
		for _, data := range [][]byte{first, second} {
			lines, rest, err := splitHints(partial, data)
			if err != nil {
				if lines != nil || rest != nil {
					t.Fatal("a refused write kept something")
				}
				return
			}
			for _, l := range lines {
				if len(l) > HintLineMax || bytes.IndexByte(l, '\n') >= 0 {
					t.Fatalf("line of %d bytes, or with a newline", len(l))
				}
				got = append(got, bytes.Clone(l))
			}
			if len(rest) > HintLineMax || bytes.IndexByte(rest, '\n') >= 0 {
				t.Fatalf("rest of %d bytes, or with a newline", len(rest))
			}
			partial = rest
		}
		joined := append(bytes.Join(got, []byte("\n")), '\n')
		if len(got) == 0 {
			joined = nil
		}
		if want := append(append([]byte(nil), first...), second...); !bytes.Equal(append(joined, partial...), want) {
			t.Fatalf("lines and rest %q, want %q", append(joined, partial...), want)
		}
		for _, l := range got {
			if p := hintPath(l, "/mnt/data"); strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
				t.Fatalf("path %q from line %q", p, l)
			}
		}
	})
}
