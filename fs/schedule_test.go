package fs

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/store"
)

func TestParseHintTellsPathsRangesAndGarbage(t *testing.T) {
	files := map[string]bool{"a.tar": true, "d/b c.tar": true, "x 1 2": true}
	isFile := func(p string) bool { return files[p] }
	for _, tc := range []struct {
		line        string
		want        hint
		ok, garbage bool
	}{
		{"a.tar", hint{path: "a.tar"}, true, false},
		{"/mnt/data/a.tar", hint{path: "a.tar"}, true, false},
		{"", hint{}, false, false},
		{"   ", hint{}, false, false},
		{"a.tar 0 100", hint{path: "a.tar", ranged: true, off: 0, length: 100}, true, false},
		{"/mnt/data/a.tar 4096\t512", hint{path: "a.tar", ranged: true, off: 4096, length: 512}, true, false},
		{"d/b c.tar 10 20", hint{path: "d/b c.tar", ranged: true, off: 10, length: 20}, true, false},
		{"x 1 2", hint{path: "x 1 2"}, true, false},             // a file's whole name wins
		{"no/such.tar", hint{path: "no/such.tar"}, true, false}, // a path; the caller finds it missing
		{"a.tar 10 x", hint{path: "a.tar 10 x"}, true, false},   // last field not a number: a path
		{"a.tar ten 100", hint{}, false, true},
		{"a.tar 10 -5", hint{}, false, true},
		{"a.tar -1 5", hint{}, false, true},
		{"a.tar 10 0", hint{}, false, true},
		{"a.tar 1 99999999999999999999", hint{}, false, true},
		{"a.tar 0x10 5", hint{}, false, true},
		{"100", hint{}, false, true},
		{"1 100", hint{}, false, true},
		{"a.tar\x00 1 2", hint{}, false, true},
		{"\xff\xfe 1 2", hint{}, false, true},
	} {
		got, ok, garbage := parseHint([]byte(tc.line), "/mnt/data", isFile)
		if got != tc.want || ok != tc.ok || garbage != tc.garbage {
			t.Errorf("parseHint(%q) = %+v, ok %v, garbage %v; want %+v, %v, %v", tc.line, got, ok, garbage, tc.want, tc.ok, tc.garbage)
		}
	}
}

// Ranges reach the schedule with the writer as owner, clipped to their
// file; each kind of bad line is counted and logged once, naming an
// example, and never reaches the schedule.
func TestHintRangesAreScheduledAndBadOnesCountedOnce(t *testing.T) {
	m, rec, logs := hintsMount("a.tar", "b.tar", "overlap.tar")
	rec.full = 3
	h := &hintsHandle{m: m}
	lines := []string{
		"a.tar 0 100",
		"a.tar",                        // a whole path, as before
		"/mnt/data/b.tar 1048000 1000", // past EOF (1 MiB): clipped to 576 bytes
		"b.tar 1048576 10",             // starts at EOF: dropped
		"b.tar 0 268435457",            // huge
		"missing.tar 0 10",             // no such file
		"a.tar ten 10",                 // garbage
		"overlap.tar 0 10",             // the schedule says it overlaps
		"overlap.tar 5 10",
		"a.tar 200 100",
		"a.tar 400 100", // the schedule is full
	}
	for _, l := range lines {
		if _, errno := h.Write(context.Background(), []byte(l+"\n"), 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	if got, want := strings.Join(rec.ranges, ","), "0:a.tar@0+100,0:b.tar@1048000+576,0:a.tar@200+100"; got != want {
		t.Errorf("scheduled %s, want %s", got, want)
	}
	if got := strings.Join(rec.keys, ","); got != "a.tar" {
		t.Errorf("hinted %s, want a.tar", got)
	}
	want := HintStats{Lines: 1, Ranges: 6, Unknown: 1, PastEOF: 2, Huge: 1, Garbage: 1, Overlapping: 2, Full: 1}
	if got := m.hints.stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	for kind, text := range hintProblemText {
		if n := strings.Count(logs.String(), text); n != 1 {
			t.Errorf("%d warnings %q, want 1 (kind %d):\n%s", n, text, kind, logs.String())
		}
	}
	for _, example := range []string{"/mnt/data/b.tar 1048000 1000", "missing.tar", "a.tar ten 10", "b.tar 0 268435457", "overlap.tar 0 10", "a.tar 400 100"} {
		if !strings.Contains(logs.String(), example) {
			t.Errorf("no warning names %q:\n%s", example, logs.String())
		}
	}
	// More of the same kinds within hintWarnEvery are counted, not logged.
	before := strings.Count(logs.String(), "\n")
	for range 1000 {
		h.Write(context.Background(), []byte("b.tar 0 999999999\nnope 1 2\n\x01\n"), 0)
	}
	if after := strings.Count(logs.String(), "\n"); after != before {
		t.Errorf("%d more log lines for 3000 more bad lines, want none", after-before)
	}
	if got := m.hints.stats(); got.Huge != 1001 || got.Unknown != 1001 || got.Garbage != 1001 {
		t.Errorf("stats %+v, want 1001 huge, unknown and garbage lines", got)
	}
}

// wholeFiles is a cache that holds the shards named in it whole.
type wholeFiles map[string]bool

func (w wholeFiles) OpenWholeFile(obj store.Object) (*os.File, bool) {
	if !w[obj.Key] {
		return nil, false
	}
	f, err := os.Open(os.DevNull)
	return f, err == nil
}

func (w wholeFiles) HasWholeFile(obj store.Object) bool { return w[obj.Key] }

func (w wholeFiles) WholeFilesDir() string { return os.TempDir() }

// Ranges of a shard the kernel reads itself (passthrough) are not
// scheduled: their reads never reach the read path, and the parts would
// hold the window until they expired.
func TestHintRangesOfPassedThroughShardsAreLeftOut(t *testing.T) {
	m, rec, _ := hintsMount("a.tar", "whole.tar")
	m.opts.WholeFiles = wholeFiles{"whole.tar": true}
	h := &hintsHandle{m: m}
	write := func() {
		if _, errno := h.Write(context.Background(), []byte("whole.tar 0 100\na.tar 0 100\nwhole.tar 200 100\n"), 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	write() // passthrough off: every range scheduled
	m.passthrough.Store(true)
	write()
	if got, want := strings.Join(rec.ranges, ","), "0:whole.tar@0+100,0:a.tar@0+100,0:whole.tar@200+100,0:a.tar@0+100"; got != want {
		t.Errorf("scheduled %s, want %s", got, want)
	}
}
