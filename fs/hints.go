package fs

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HintLineMax is the longest line the hints file takes, newline excluded:
// a path (PATH_MAX). A write that would make a line longer fails with
// E2BIG and the unfinished line is dropped, so a writer that never sends
// a newline costs the daemon at most this much per open file.
const HintLineMax = 4096

// hintWarnEvery is how often at most the mount logs hints that name no
// file: a loader writing a wrong schedule says so once, not once a line.
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

// HintStats counts what the hints file was sent since the mount started.
type HintStats struct {
	Lines   uint64 // lines that named a file of the mount
	Unknown uint64 // lines that named no file
	Refused uint64 // writes refused with E2BIG (a line too long)
}

// hintCounters are a mount's HintStats, and the state that keeps its
// warnings about them to one line per hintWarnEvery.
type hintCounters struct {
	lines, unknown, refused atomic.Uint64

	mu         sync.Mutex
	lastWarn   time.Time
	suppressed uint64 // unknown lines since the last warning
}

func (c *hintCounters) stats() HintStats {
	return HintStats{Lines: c.lines.Load(), Unknown: c.unknown.Load(), Refused: c.refused.Load()}
}

// unknownPaths counts n lines that named no file, first among them, and
// logs them unless a warning was logged less than hintWarnEvery ago; the
// next warning then says how many lines it stands for.
func (c *hintCounters) unknownPaths(log *slog.Logger, n uint64, first string) {
	c.unknown.Add(n)
	c.mu.Lock()
	c.suppressed += n
	now := time.Now()
	if !c.lastWarn.IsZero() && now.Sub(c.lastWarn) < hintWarnEvery {
		c.mu.Unlock()
		return
	}
	lines := c.suppressed
	c.lastWarn, c.suppressed = now, 0
	c.mu.Unlock()
	log.Warn("hints name no file of the mount", "lines", lines, "example", first, "total", c.unknown.Load())
}
