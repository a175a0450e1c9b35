package store

import (
	"context"
	"io"
)

// Progress receives, while a ReadRange runs, how many leading bytes of its
// buffer are final: they hold the object's bytes and will not be written
// again. Calls come from the reading goroutine, in increasing order; the
// last may come after ReadRange has returned nothing new. A reader that
// waits for part of a range uses it to start before the whole range is in.
//
// Bytes of one response are trusted in the order the connection delivers
// them (TCP, and TLS on https endpoints, make that order exact); the ETag
// pin keeps the bytes of every attempt to one version.
type Progress func(n int)

type progressKey struct{}

// WithProgress returns ctx carrying fn: ReadRange calls under ctx report to
// it. Like httptrace.WithClientTrace, it is a hook, not a cancellation.
func WithProgress(ctx context.Context, fn Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress tells the Progress ctx carries, if any, that the first n
// bytes of the buffer being read are final. Backends outside this package
// call it; inside, readFullReporting does.
func ReportProgress(ctx context.Context, n int) {
	if fn := progressOf(ctx); fn != nil {
		fn(n)
	}
}

// progressOf returns the Progress ctx carries, or nil.
func progressOf(ctx context.Context) Progress {
	fn, _ := ctx.Value(progressKey{}).(Progress)
	return fn
}

// progressStep is how many new bytes a body reader accumulates before it
// reports: a waiting reader wants its bytes soon, but not one wake-up per
// network read.
const progressStep = 32 << 10

// readStep bounds one read of a body that reports progress: a report's
// callee may read the bytes just copied (prefetch sums them for the cache),
// and a read of several MiB waiting in a socket would push its first bytes
// out of the CPU's caches before the report.
const readStep = 256 << 10

// readFullReporting is io.ReadFull that reports progress every
// progressStep bytes and at the end.
func readFullReporting(r io.Reader, p []byte, report Progress) (int, error) {
	if report == nil {
		return io.ReadFull(r, p)
	}
	n, reported := 0, 0
	for n < len(p) {
		m, err := r.Read(p[n:min(len(p), n+readStep)])
		n += m
		if n-reported >= progressStep || (n == len(p) && n > reported) {
			report(n)
			reported = n
		}
		if err != nil {
			if n > reported {
				report(n)
			}
			if err == io.EOF && n < len(p) {
				err = io.ErrUnexpectedEOF
			}
			if n == len(p) {
				err = nil
			}
			return n, err
		}
	}
	return n, nil
}
