package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// progress reports bytes done against a total: a redrawn bar on a
// terminal, a plain line every few seconds when piped (logs, CI).
type progress struct {
	w      io.Writer
	tty    bool
	total  int64
	done   atomic.Int64
	start  time.Time
	stop   chan struct{}
	wg     sync.WaitGroup
	prefix string
}

func startProgress(w io.Writer, prefix string, total int64) *progress {
	p := &progress{w: w, tty: isTerminal(w), total: total, start: time.Now(), stop: make(chan struct{}), prefix: prefix}
	interval := 5 * time.Second
	if p.tty {
		interval = 200 * time.Millisecond
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.done.Add(n) }

// finish stops the redraws and prints the last state.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	p.draw(true)
}

func (p *progress) draw(final bool) {
	done := p.done.Load()
	elapsed := time.Since(p.start)
	rate := float64(done) / max(elapsed.Seconds(), 1e-3)
	eta := "-"
	if rate > 0 && done < p.total {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second / time.Second).Round(time.Second).String()
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	line := fmt.Sprintf("%s %s / %s (%.1f%%) %s/s ETA %s", p.prefix, formatSize(done), formatSize(p.total), pct, formatSize(int64(rate)), eta)
	if p.tty {
		const width = 30
		filled := int(pct / 100 * width)
		bar := "[" + strings.Repeat("=", filled) + strings.Repeat(" ", width-filled) + "] "
		end := ""
		if final {
			end = "\n"
		}
		fmt.Fprintf(p.w, "\r\033[K%s%s%s", bar, line, end)
		return
	}
	fmt.Fprintln(p.w, line)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
