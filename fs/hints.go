package fs

import (
	"bytes"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// HintLineMax is the longest line the hints file takes, newline excluded:
// a path (PATH_MAX). A write that would make a line longer fails with
// E2BIG and the unfinished line is dropped, so a writer that never sends
// a newline costs the daemon at most this much per open file.
const HintLineMax = 4096

// HintRangeMax is the longest range a schedule line may name: a sample,
// however large, is smaller. A longer range is dropped and counted.
const HintRangeMax = 256 << 20

// hintWarnEvery is how often at most the mount logs each kind of bad hint
// (hintProblem): a loader writing a wrong schedule says so once, not once
// a line.
const hintWarnEvery = 10 * time.Second

var errHintTooLong = fmt.Errorf("hints line longer than %d bytes: %w", HintLineMax, syscall.E2BIG)

// splitHints appends data to partial (an unfinished line from earlier
// writes) and splits the result into complete lines and the new
// unfinished rest. It fails, keeping nothing, when a line or the rest is
// longer than HintLineMax. It copies only the rest, never data as a whole.
func splitHints(partial, data []byte) (lines [][]byte, rest []byte, err error) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		if len(partial)+len(data) > HintLineMax {
			return nil, nil, errHintTooLong
		}
		return nil, append(partial, data...), nil
	}
	if len(partial)+i > HintLineMax {
		return nil, nil, errHintTooLong
	}
	lines = append(lines, append(partial, data[:i]...))
	data = data[i+1:]
	for {
		i = bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if i > HintLineMax {
			return nil, nil, errHintTooLong
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	if len(data) > HintLineMax {
		return nil, nil, errHintTooLong
	}
	return lines, append([]byte(nil), data...), nil
}

// hintPath turns one hints line into a path relative to the mount root:
// surrounding space and slashes trimmed, and the mount point taken off an
// absolute path. "" means the line names nothing.
func hintPath(line []byte, mountPoint string) string {
	path := strings.TrimSpace(string(line))
	if mountPoint != "" {
		path = strings.TrimPrefix(path, strings.TrimSuffix(mountPoint, "/")+"/")
	}
	return strings.Trim(path, "/")
}

// hint is one hints line: a whole path (the file's start is prefetched) or,
// with ranged, the range [off, off+length) of path (a sample schedule).
type hint struct {
	path        string
	ranged      bool
	off, length int64
}

// parseHint reads one hints line. The line is a whole path when it names
// a file of the mount (isFile); otherwise, when its last field starts
// like a number, it is PATH OFFSET LENGTH (decimal, OFFSET >= 0,
// LENGTH > 0), and garbage when it is not quite that. A line with control
// characters or that is not UTF-8 is garbage; a blank line is nothing
// (ok false, garbage false).
func parseHint(line []byte, mountPoint string, isFile func(string) bool) (h hint, ok, garbage bool) {
	text := strings.TrimSpace(string(line))
	if text == "" {
		return hint{}, false, false
	}
	if !utf8.ValidString(text) || strings.IndexFunc(text, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0 {
		return hint{}, false, true
	}
	whole := hintPath(line, mountPoint)
	rest, lenField := cutLastField(text)
	if isFile(whole) || !looksNumeric(lenField) {
		return hint{path: whole}, whole != "", false
	}
	rest, offField := cutLastField(rest)
	off, err1 := strconv.ParseInt(offField, 10, 64)
	length, err2 := strconv.ParseInt(lenField, 10, 64)
	path := hintPath([]byte(rest), mountPoint)
	if err1 != nil || err2 != nil || off < 0 || length <= 0 || path == "" {
		return hint{}, false, true
	}
	return hint{path: path, ranged: true, off: off, length: length}, true, false
}

// cutLastField splits text at its last run of spaces or tabs.
func cutLastField(text string) (rest, last string) {
	i := strings.LastIndexAny(text, " \t")
	if i < 0 {
		return "", text
	}
	return strings.TrimRight(text[:i], " \t"), text[i+1:]
}

// looksNumeric reports whether a field starts like a decimal number.
func looksNumeric(f string) bool {
	return f != "" && (f[0] >= '0' && f[0] <= '9' || f[0] == '-' || f[0] == '+')
}

// hintProblem is a kind of bad hint: each is counted and logged on its own.
type hintProblem uint8

const (
	hintUnknown     hintProblem = iota // names no file of the mount
	hintPastEOF                        // a range past the end of its file: clipped there, dropped if it starts there
	hintHuge                           // a range longer than HintRangeMax: dropped
	hintGarbage                        // neither a path nor PATH OFFSET LENGTH
	hintOverlapping                    // a range overlapping the writer's previous one: only its new bytes kept
	hintFull                           // a range refused: the schedule is full (prefetch.MaxScheduledRanges)
	hintProblems
)

var hintProblemText = [hintProblems]string{
	hintUnknown:     "hints name no file of the mount",
	hintPastEOF:     "hint ranges reach past the end of their file; clipped",
	hintHuge:        "hint ranges longer than " + strconv.Itoa(HintRangeMax>>20) + " MiB; dropped",
	hintGarbage:     "hints lines are neither a path nor PATH OFFSET LENGTH; dropped",
	hintOverlapping: "hint ranges overlap the previous range of the same writer; only new bytes kept",
	hintFull:        "hint ranges refused: the schedule is full",
}

// HintStats counts what the hints file was sent since the mount started.
type HintStats struct {
	Lines       uint64 // whole-path lines that named a file of the mount
	Ranges      uint64 // PATH OFFSET LENGTH lines passed to the schedule
	Unknown     uint64 // lines that named no file
	PastEOF     uint64 // ranges past the end of their file
	Huge        uint64 // ranges longer than HintRangeMax
	Garbage     uint64 // lines neither a path nor PATH OFFSET LENGTH
	Overlapping uint64 // ranges overlapping the writer's previous one
	Full        uint64 // ranges refused by a full schedule
	Refused     uint64 // writes refused with E2BIG (a line too long)
}

// hintCounters are a mount's HintStats, and the state that keeps its
// warnings about each kind of bad hint to one line per hintWarnEvery.
type hintCounters struct {
	lines, ranges, refused atomic.Uint64
	problems               [hintProblems]atomic.Uint64

	mu         sync.Mutex
	lastWarn   [hintProblems]time.Time
	suppressed [hintProblems]uint64 // lines since the last warning of the kind
}

func (c *hintCounters) stats() HintStats {
	p := func(k hintProblem) uint64 { return c.problems[k].Load() }
	return HintStats{
		Lines: c.lines.Load(), Ranges: c.ranges.Load(), Refused: c.refused.Load(),
		Unknown: p(hintUnknown), PastEOF: p(hintPastEOF), Huge: p(hintHuge), Garbage: p(hintGarbage),
		Overlapping: p(hintOverlapping), Full: p(hintFull),
	}
}

// problem counts n lines of kind, example among them, and logs them unless
// a warning of that kind was logged less than hintWarnEvery ago; the next
// warning then says how many lines it stands for.
func (c *hintCounters) problem(log *slog.Logger, kind hintProblem, n uint64, example string) {
	if n == 0 {
		return
	}
	c.problems[kind].Add(n)
	c.mu.Lock()
	c.suppressed[kind] += n
	now := time.Now()
	if last := c.lastWarn[kind]; !last.IsZero() && now.Sub(last) < hintWarnEvery {
		c.mu.Unlock()
		return
	}
	lines := c.suppressed[kind]
	c.lastWarn[kind], c.suppressed[kind] = now, 0
	c.mu.Unlock()
	log.Warn(hintProblemText[kind], "lines", lines, "example", example, "total", c.problems[kind].Load())
}
