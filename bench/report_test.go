package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// rec is one record of an accelerator sweep: value is the AU.
func rec(system, role string, x float64, round int, value float64) Record {
	r := Record{Scenario: "au", Workload: "resnet50", Kind: "accelerators", System: system, Role: role, Store: "remote",
		Dataset: "shards", Round: round, Pass: 1, XName: "accelerators", X: x, Figure: "au", Value: value, HigherIsBetter: true,
		BytesRead: 2e9, CPU: CPU{Daemon: 2, Store: 1, Proxy: 1, Readers: 8}, StoreSentBytes: 2.1e9, DaemonPeakRSS: 300 << 20,
		Tree: "v1-2-gabc", Machine: Machine{Host: "box", CPUs: 2, CPUModel: "cpu", MemBytes: 16 << 30, Kernel: "6.1"}}
	if system == "shardfs" {
		// The daemon's own counters span the whole pass: more served than
		// the workload's window read, and fetched in proportion.
		r.DaemonFetchedBytes, r.DaemonServedBytes = 2.4e9, 2.4e9
		if x == 4 {
			evicted := int64(0.06e9) // rows at 16 were written before it was counted
			r.DaemonEvictedUnreadBytes = &evicted
		}
	}
	return r
}

func sweep() []Record {
	var recs []Record
	for round, v := range [][4]float64{{0.99, 0.95, 0.97, 0.66}, {0.97, 0.91, 0.93, 0.60}, {0.98, 0.93, 0.95, 0.70}} {
		recs = append(recs, rec("local", "ceiling", 4, round+1, v[0]), rec("shardfs", "subject", 4, round+1, v[1]),
			rec("rclone", "peer", 4, round+1, v[2]), rec("s3fs", "peer", 4, round+1, v[3]))
	}
	for round, v := range [][4]float64{{0.90, 0.60, 0.40, 0.20}, {0.92, 0.50, 0.44, 0.30}} {
		recs = append(recs, rec("local", "ceiling", 16, round+1, v[0]), rec("shardfs", "subject", 16, round+1, v[1]),
			rec("rclone", "peer", 16, round+1, v[2]), rec("s3fs", "peer", 16, round+1, v[3]))
	}
	failed := rec("shardfs", "subject", 16, 3, 0)
	failed.Error = "shardfs exited while mounting"
	return append(recs, failed)
}

func TestSummarizeMediansRangesAndRatios(t *testing.T) {
	tables := Summarize(sweep())
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1", len(tables))
	}
	rows := tables[0].Rows
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	sh4, sh16 := rows[1], rows[5]
	if sh4.System != "shardfs" || sh4.X != 4 || sh4.Median != 0.93 || sh4.Min != 0.91 || sh4.Max != 0.95 || sh4.Rounds != 3 {
		t.Errorf("shardfs at 4: %+v", sh4)
	}
	// Ceiling: local's median 0.98; best peer: rclone's 0.95.
	if !near(sh4.VsCeiling, 0.93/0.98) || !near(sh4.VsPeer, 0.93/0.95) {
		t.Errorf("shardfs at 4: × ceiling %v, × best peer %v", sh4.VsCeiling, sh4.VsPeer)
	}
	// Two rounds give the mean of the middle two; the failed round counts apart.
	if !near(sh16.Median, 0.55) || sh16.Rounds != 2 || sh16.Failed != 1 || !near(sh16.VsPeer, 0.55/0.42) {
		t.Errorf("shardfs at 16: %+v", sh16)
	}
	if !near(sh4.DaemonCPU, 1) || !near(sh4.StoreCPU, 1) || !near(sh4.ReaderCPU, 4) || !near(sh4.FetchedPerRead, 1.05) || sh4.PeakRSSMiB != 300 {
		t.Errorf("shardfs at 4, costs: %+v", sh4)
	}
	if !near(sh4.FetchedPerServed, 1) || !math.IsNaN(rows[2].FetchedPerServed) {
		t.Errorf("daemon fetched / served: shardfs %v (want 1: its own counters over the same span), rclone %v (want none)", sh4.FetchedPerServed, rows[2].FetchedPerServed)
	}
	if !near(sh4.EvictedPerServed, 0.025) || !math.IsNaN(sh16.EvictedPerServed) {
		t.Errorf("daemon evicted unread / served: %v at 4 (want 0.025), %v at 16 (want none: not counted then)", sh4.EvictedPerServed, sh16.EvictedPerServed)
	}
	if local := rows[0]; local.VsCeiling != 1 {
		t.Errorf("the ceiling against itself: %v", local.VsCeiling)
	}
}

// For a figure where lower is better, the best peer is the lowest.
func TestSummarizeLowerIsBetter(t *testing.T) {
	var recs []Record
	for _, y := range []struct {
		name, role string
		ms         float64
	}{{"direct", "ceiling", 20}, {"shardfs", "subject", 30}, {"s3fs", "peer", 45}, {"rclone", "peer", 60}} {
		r := rec(y.name, y.role, 0, 1, y.ms)
		r.Workload, r.Figure, r.HigherIsBetter, r.XName = "ttfb", "ttfb_ms", false, ""
		recs = append(recs, r)
	}
	rows := Summarize(recs)[0].Rows
	if !near(rows[1].VsPeer, 30.0/45) || !near(rows[1].VsCeiling, 1.5) {
		t.Errorf("shardfs: × best peer %v (want 30/45), × ceiling %v (want 1.5)", rows[1].VsPeer, rows[1].VsCeiling)
	}
}

func TestMarkdownStatesTheCommandTreeAndMachine(t *testing.T) {
	tables := Summarize(sweep())
	md := Markdown(tables, map[string]string{"au/resnet50/remote": "bench/au-resnet50-remote.png"})
	markdownHas(t, md,
		"### au: resnet50, remote store",
		"`shardfs bench run bench/scenarios/au.yaml`, data set shards; figure: au (higher is better); tree v1-2-gabc; box, 2 CPUs (cpu), 16 GiB RAM, Linux 6.1.",
		"![au resnet50, remote](bench/au-resnet50-remote.png)",
		"| accelerators | system | au (median) | range | rounds | × ceiling | × best peer |",
		"| 4 | shardfs | 0.93 | 0.91–0.95 | 3 | 0.949 | 0.979 | 1 | 1 | 4 | 300 | 1.05 |",
		"| 16 | shardfs | 0.55 | 0.5–0.6 | 2 (1 failed) |",
	)
}

func TestPlotsHaveASeriesPerSystem(t *testing.T) {
	plots := Plots(Summarize(sweep()))
	if len(plots) != 1 || plots[0].File != "au-resnet50-remote.png" || len(plots[0].Series) != 4 {
		t.Fatalf("plots: %+v", plots)
	}
	s := plots[0].Series[1]
	if s.System != "shardfs" || len(s.X) != 2 || s.X[1] != 16 || !near(s.Median[1], 0.55) || s.Min[0] != 0.91 || s.Max[0] != 0.95 {
		t.Errorf("shardfs series: %+v", s)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range sweep() {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := decodeRecords(&buf)
	if err != nil || len(recs) != len(sweep()) || recs[0].Machine.CPUs != 2 || recs[len(recs)-1].Error == "" {
		t.Fatalf("decoded %d records, %v", len(recs), err)
	}
	if _, err := decodeRecords(strings.NewReader("{}\n{bad\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line: %v, want an error naming line 2", err)
	}
}

func TestSpliceReplacesOnlyTheGeneratedSection(t *testing.T) {
	doc := "# Title\n" + BeginMarker + "\nold tables\n" + EndMarker + "\n## Method\n"
	got, err := Splice(doc, "new tables\n")
	if err != nil || got != "# Title\n"+BeginMarker+"\nnew tables\n"+EndMarker+"\n## Method\n" {
		t.Errorf("spliced %q, %v", got, err)
	}
	if _, err := Splice("# no markers\n", "x"); err == nil {
		t.Error("a document without markers took the tables")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A point whose every round failed shows as failed, not as a figure, the
// reasons are listed under the table, and the heading names the tree of
// each system when they differ.
func TestMarkdownShowsFailedRowsAndEachSystemsTree(t *testing.T) {
	var recs []Record
	for round := 1; round <= 2; round++ {
		local, now, before := rec("local", "ceiling", 16, round, 0.98), rec("shardfs", "subject", 16, round, 0.8), rec("shardfs-before", "subject", 16, round, 0)
		local.Tree, now.Tree, before.Tree = "9bc6307a1b2c", "9bc6307a1b2c", "4b9d18c0d1e2"
		before.Error, before.TimeoutSeconds, before.Teardown = "timeout after 660s", 660, []string{"readers killed"}
		recs = append(recs, local, now, before)
	}
	md := Markdown(Summarize(recs), nil)
	markdownHas(t, md,
		"; trees 9bc6307a1b2c (local, shardfs), 4b9d18c0d1e2 (shardfs-before); box,",
		"| 16 | shardfs-before | failed | – | 0 (2 failed) | – | – |",
		"Failed:\n\n- shardfs-before at accelerators 16: 2 of 2 rounds failed: timeout after 660s\n",
	)
	if p := Plots(Summarize(recs)); len(p) != 1 || len(p[0].Series) != 2 {
		t.Errorf("plots %+v: want the two systems with figures, and no line at zero for the failed one", p)
	}
}

// A row the scenario skips is shown as not run, with its reason under the
// table: not as a failure, not in the ratios, not on the plot, and its
// empty figure and tree name nothing.
func TestMarkdownShowsSkippedRowsWithTheirReason(t *testing.T) {
	skip := Record{Scenario: "au", Workload: "resnet50", System: "rclone", Role: "peer", Store: "remote", Dataset: "shards",
		Round: 1, Pass: 1, XName: "accelerators", X: 16, Skipped: "it fills this box's memory",
		Machine: Machine{Host: "box", CPUs: 2, CPUModel: "cpu", MemBytes: 16 << 30, Kernel: "6.1"}}
	recs := []Record{skip, rec("local", "ceiling", 16, 1, 0.9), rec("shardfs", "subject", 16, 1, 0.8), rec("s3fs", "peer", 16, 1, 0.4)}
	tables := Summarize(recs)
	md := Markdown(tables, nil)
	markdownHas(t, md,
		"figure: au (higher is better); tree v1-2-gabc; box,",
		"| 16 | rclone | not run | – | 0 |",
		"| 16 | shardfs | 0.8 | 0.8–0.8 | 1 | 0.889 | 2 |",
		"Not run:\n\n- rclone: it fills this box's memory\n",
	)
	if strings.Contains(md, "Failed:") {
		t.Errorf("a skipped row is listed as failed:\n%s", md)
	}
	if p := Plots(tables); len(p) != 1 || len(p[0].Series) != 3 {
		t.Errorf("plots %+v: want the three systems with figures, and no line for the skipped one", p)
	}
}

// markdownHas fails t for each of wants that md lacks.
func markdownHas(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
