package store

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestReadFullReportingReportsFinalPrefixes(t *testing.T) {
	src := make([]byte, 3*progressStep+100)
	for i := range src {
		src[i] = byte(i)
	}
	cases := []struct {
		name    string
		r       io.Reader
		size    int
		wantN   int
		wantErr error
	}{
		{"whole body in small reads", iotest.HalfReader(bytes.NewReader(src)), len(src), len(src), nil},
		{"body cut short", bytes.NewReader(src[:progressStep+10]), len(src), progressStep + 10, io.ErrUnexpectedEOF},
		{"body longer than the buffer", bytes.NewReader(src), progressStep, progressStep, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := make([]byte, c.size)
			var reports []int
			n, err := readFullReporting(c.r, p, func(n int) {
				// Everything reported must already be in place.
				if !bytes.Equal(p[:n], src[:n]) {
					t.Fatalf("reported %d bytes before they were in the buffer", n)
				}
				if len(reports) > 0 && n <= reports[len(reports)-1] {
					t.Fatalf("report %d after %d: not increasing", n, reports[len(reports)-1])
				}
				reports = append(reports, n)
			})
			if n != c.wantN || !errors.Is(err, c.wantErr) {
				t.Fatalf("readFullReporting = %d, %v; want %d, %v", n, err, c.wantN, c.wantErr)
			}
			if len(reports) == 0 || reports[len(reports)-1] != n {
				t.Fatalf("reports %v do not end at %d", reports, n)
			}
			for i := 1; i < len(reports)-1; i++ {
				if reports[i]-reports[i-1] < progressStep {
					t.Fatalf("reports %v closer than %d apart", reports, progressStep)
				}
			}
		})
	}
}
