package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// startProgress reports bytes done against a total: a redrawn bar on a
// terminal, a plain line every few seconds when piped (logs, CI).
func startProgress(w io.Writer, prefix string, total int64) *progressbar.ProgressBar {
	if isTerminal(w) {
		return progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(prefix),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionOnCompletion(func() { io.WriteString(w, "\n") }),
		)
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(lines{w}),
		progressbar.OptionSetDescription(prefix),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(5*time.Second),
	)
}

// lines turns the bar's redraws (carriage returns, blank-outs) into one
// plain line per redraw, for a log file or a pipe.
type lines struct{ w io.Writer }

func (l lines) Write(p []byte) (int, error) {
	if s := strings.TrimSpace(strings.ReplaceAll(string(p), "\r", "")); s != "" {
		if _, err := io.WriteString(l.w, s+"\n"); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
