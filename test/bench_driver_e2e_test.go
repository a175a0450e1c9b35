//go:build e2e

package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfs/shardfs/bench"
)

// driverScenario reads a tiny data set on both stores, through a mount,
// from the local copy and with direct GETs, at two reader counts, in two
// rounds.
const driverScenario = `
about: the driver's own end-to-end check
rounds: 2
stores: [loopback, remote]
remote: {latency_ms: 1, rate_kbps: 100000}
datasets:
  - {name: e2e-driver, shards: 2, samples: 4, sample_size: 64KiB}
systems:
  - {name: local, kind: local}
  - {name: shardfs, kind: shardfs}
  - {name: direct, kind: direct}
workloads:
  - {name: seq, kind: seq, dataset: e2e-driver, sweep: {param: readers, values: [1, 2]}}
`

// TestBenchDriverRunsAndReports runs `shardfs bench run` on a scenario and
// `shardfs bench report` on its results, as a user would: every run is
// recorded in the interleaved order with every byte read, nothing stays
// mounted, and the report has the tables and the plots.
func TestBenchDriverRunsAndReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scenario := filepath.Join(dir, "driver.yaml")
	if err := os.WriteFile(scenario, []byte(driverScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	run := exec.Command(e2e.bin, "bench", "run", "--root", e2e.root, "--out", out, scenario)
	if msg, err := run.CombinedOutput(); err != nil {
		t.Fatalf("shardfs bench run: %v\n%s", err, msg)
	}
	if isMounted(filepath.Join(out, "mnt")) {
		t.Error("the driver left its mountpoint mounted")
	}
	recs, err := bench.ReadRecords(filepath.Join(out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := dataSetBytes(t, filepath.Join(e2e.root, ".work", "bench-data"), "e2e-driver-")
	var order []string
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s on %s, round %d: %s", r.System, r.Store, r.Round, r.Error)
		}
		if r.BytesRead != want || r.Value <= 0 {
			t.Errorf("%s on %s, round %d: read %d bytes at %g MB/s, want %d bytes", r.System, r.Store, r.Round, r.BytesRead, r.Value, want)
		}
		if (r.System == "shardfs" || r.System == "direct") && r.StoreSentBytes < want {
			t.Errorf("%s on %s: MinIO sent %d bytes for a cold read of %d", r.System, r.Store, r.StoreSentBytes, want)
		}
		if r.System == "shardfs" && (r.DaemonPeakRSS == 0 || r.DaemonFetchedBytes < want) {
			t.Errorf("shardfs on %s: peak RSS %d, fetched %d of %d bytes", r.Store, r.DaemonPeakRSS, r.DaemonFetchedBytes, want)
		}
		if r.Round == 1 && r.Store == "loopback" && r.X == 1 || r.Round == 2 && r.Store == "loopback" && r.X == 1 {
			order = append(order, r.System)
		}
	}
	if len(recs) != 2*2*2*3 {
		t.Errorf("%d records, want 24 (2 rounds x 2 stores x 2 reader counts x 3 systems)", len(recs))
	}
	if got := strings.Join(order, " "); got != "local shardfs direct shardfs direct local" {
		t.Errorf("systems ran in the order %q; want each round to start one system later", got)
	}

	plots := filepath.Join(dir, "plots")
	report := exec.Command(e2e.bin, "bench", "report", "--root", e2e.root, "--plots", plots, filepath.Join(out, "results.jsonl"))
	md, err := report.Output()
	if err != nil {
		t.Fatalf("shardfs bench report: %v\n%s", err, md)
	}
	for _, want := range []string{"### driver: seq, loopback store", "### driver: seq, remote store",
		"| readers | system | mbps (median) |", "| 2 | shardfs |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	for _, png := range []string{"driver-seq-loopback.png", "driver-seq-remote.png"} {
		b, err := os.ReadFile(filepath.Join(plots, png))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("plot %s: not a PNG (%v)", png, err)
		}
	}
}

// dataSetBytes sums the files of the one generated data set under dir
// whose name starts with prefix.
func dataSetBytes(t *testing.T, dir, prefix string) int64 {
	t.Helper()
	sets, err := filepath.Glob(filepath.Join(dir, prefix+"*"))
	if err != nil || len(sets) != 1 {
		t.Fatalf("data sets %v (%v), want one", sets, err)
	}
	var total int64
	entries, err := os.ReadDir(sets[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !strings.HasPrefix(e.Name(), ".") {
			total += info.Size()
		}
	}
	return total
}
