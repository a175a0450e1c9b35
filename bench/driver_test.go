package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// stagedProc is a workload process as a test stages it: one that prints
// its figures and exits at once, or one that never ends until killed.
type stagedProc struct {
	done   chan struct{}
	killed time.Time
}

func (p *stagedProc) exited() <-chan struct{}  { return p.done }
func (p *stagedProc) result() (float64, error) { return 0.5, nil }

func (p *stagedProc) kill() {
	if p.killed.IsZero() {
		p.killed = time.Now()
		close(p.done)
	}
}

// A pass that never ends is recorded as timed out at its workload's
// deadline, the run's later passes are not run, and the driver goes on
// with the next run; every row is in the results file before the next
// pass starts.
func TestDriverRecordsATimedOutRunAndGoesOn(t *testing.T) {
	s, err := ParseScenario([]byte(`
rounds: 1
stores: [loopback]
timeout_s: 3600
datasets:
  - {name: tiny, files: 1, file_size: 4KiB}
systems:
  - {name: local, kind: local}
workloads:
  - {name: hangs, kind: command, dataset: tiny, passes: 3, timeout_s: 90, argv: [hangs], figure: samples}
  - {name: ends, kind: command, dataset: tiny, argv: [ends], figure: samples}
`), false)
	if err != nil {
		t.Fatal(err)
	}
	root, out := t.TempDir(), t.TempDir()
	for _, dir := range []string{"logs", "tmp"} {
		if err := os.Mkdir(filepath.Join(out, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	results, err := os.Create(filepath.Join(out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer results.Close()

	synctest.Test(t, func(t *testing.T) {
		var log bytes.Buffer
		d := &driver{o: Options{Root: root, Out: out, Shardfs: "/opt/shardfs", Log: &log}, results: json.NewEncoder(results),
			mnt: filepath.Join(out, "mnt"), source: "v1-3-gabc", trees: map[string]string{"/opt/shardfs": "0123456789ab-dirty"},
			uploaded: map[string]bool{}, minio: &server{cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}},
			dropCaches: func() error { return nil }}
		ds := &s.Datasets[0]
		if err := os.MkdirAll(d.datasetDir(ds), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.datasetDir(ds), ".done"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		d.uploaded[d.prefix(ds)] = true

		// The first pass of hangs ends, its second never does; ends ends.
		var starts []string
		var hung *stagedProc
		var hungAt time.Time
		d.start = func(cmd *exec.Cmd) (proc, error) {
			recs, err := decodeRecords(strings.NewReader(readFile(t, results.Name())))
			if err != nil || len(recs) != len(starts) {
				t.Errorf("when pass %d started the results held %d rows (%v), want one per pass before it", len(starts)+1, len(recs), err)
			}
			starts = append(starts, cmd.Args[0])
			p := &stagedProc{done: make(chan struct{})}
			if len(starts) == 2 {
				hung, hungAt = p, time.Now()
				return p, nil
			}
			fmt.Fprintln(cmd.Stdout, `{"samples": 12}`)
			close(p.done)
			return p, nil
		}
		failed, total, err := d.scenario(context.Background(), s)
		if err != nil || failed != 1 || total != 3 {
			t.Fatalf("scenario: %d of %d rows failed, %v; want 1 of 3", failed, total, err)
		}
		if !slices.Equal(starts, []string{"hangs", "hangs", "ends"}) {
			t.Errorf("workloads started: %q; want two passes of hangs, then ends", starts)
		}
		if hung == nil || hung.killed.Sub(hungAt) != 90*time.Second {
			t.Errorf("the hung pass was killed %v after it started, want its timeout_s, 90s", hung.killed.Sub(hungAt))
		}
		if !strings.Contains(log.String(), "failed: timeout after 90s\n    readers killed\n") {
			t.Errorf("the log does not say the pass timed out and what was done:\n%s", log.String())
		}
	})

	recs, err := ReadRecords(results.Name())
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v; want the pass before the hang, the timed-out pass and the next run's", len(recs), err)
	}
	h := recs[1]
	if h.Workload != "hangs" || h.Pass != 2 || h.Error != "timeout after 90s" || h.TimeoutSeconds != 90 ||
		!slices.Equal(h.Teardown, []string{"readers killed"}) || h.Value != 0 || h.Figures != nil {
		t.Errorf("the timed-out row: %+v", h)
	}
	for _, r := range []Record{recs[0], recs[2]} {
		if r.Error != "" || r.Value != 12 || r.Teardown != nil {
			t.Errorf("%s pass %d: %+v", r.Workload, r.Pass, r)
		}
	}
	if recs[0].TimeoutSeconds != 90 || recs[2].TimeoutSeconds != 3600 {
		t.Errorf("deadlines %g and %g, want the workload's 90 and the scenario's 3600", recs[0].TimeoutSeconds, recs[2].TimeoutSeconds)
	}
	for _, r := range recs {
		if r.Tree != "0123456789ab-dirty" || r.SourceTree != "v1-3-gabc" {
			t.Errorf("%s: tree %q, source tree %q; want the binary's and the source's", r.Workload, r.Tree, r.SourceTree)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}
