package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const twoStores = `
rounds: 2
stores: [loopback, remote]
remote: {latency_ms: 20, rate_kbps: 50000}
datasets:
  - {name: shards, shards: 64, samples: 256, sample_size: 100KiB, smoke: {shards: 2, samples: 4}}
systems:
  - {name: local, kind: local}
  - {name: shardfs, kind: shardfs}
  - {name: rclone, kind: rclone}
  - {name: direct, kind: direct}
workloads:
  - name: au
    kind: accelerators
    dataset: shards
    sweep: {param: accelerators, values: [4, 8], smoke: {values: [1]}}
    params: {model: resnet50, window_s: 30, smoke: {window_s: 2}}
  - {name: seq, kind: seq, dataset: shards, stores: [loopback], systems: [direct, shardfs]}
`

func TestExpandInterleavesSystemsRoundByRound(t *testing.T) {
	s, err := ParseScenario([]byte(twoStores), false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Expand() {
		got = append(got, fmt.Sprintf("%d %s %s %g %s", r.Round, r.Store, r.Workload.Name, r.X, r.System.Name))
	}
	want := []string{
		// Round 1: every point, systems in file order; direct reads no files.
		"1 loopback au 4 local", "1 loopback au 4 shardfs", "1 loopback au 4 rclone",
		"1 loopback au 8 local", "1 loopback au 8 shardfs", "1 loopback au 8 rclone",
		"1 loopback seq 0 shardfs", "1 loopback seq 0 direct",
		"1 remote au 4 local", "1 remote au 4 shardfs", "1 remote au 4 rclone",
		"1 remote au 8 local", "1 remote au 8 shardfs", "1 remote au 8 rclone",
		// Round 2: the same points, each starting with the next system.
		"2 loopback au 4 shardfs", "2 loopback au 4 rclone", "2 loopback au 4 local",
		"2 loopback au 8 shardfs", "2 loopback au 8 rclone", "2 loopback au 8 local",
		"2 loopback seq 0 direct", "2 loopback seq 0 shardfs",
		"2 remote au 4 shardfs", "2 remote au 4 rclone", "2 remote au 4 local",
		"2 remote au 8 shardfs", "2 remote au 8 rclone", "2 remote au 8 local",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("runs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A workload's skip marks its runs of one system through one store with
// the reason, and leaves every other run as it was.
func TestExpandMarksSkippedRuns(t *testing.T) {
	yaml := strings.Replace(twoStores, "params: {model", "skip: [{system: rclone, store: remote, reason: it fills the memory}]\n    params: {model", 1)
	s, err := ParseScenario([]byte(yaml), false)
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Expand()
	if len(runs) != 28 {
		t.Fatalf("%d runs, want 28: a skipped run is still listed, to be recorded", len(runs))
	}
	skipped := 0
	for _, r := range runs {
		want := ""
		if r.System.Name == "rclone" && r.Store == "remote" {
			want, skipped = "it fills the memory", skipped+1
		}
		if r.Skipped != want {
			t.Errorf("round %d %s %s on %s: skipped %q, want %q", r.Round, r.Store, r.Workload.Name, r.System.Name, r.Skipped, want)
		}
	}
	if skipped != 4 {
		t.Errorf("%d runs skipped, want 4 (two rounds, two points)", skipped)
	}
}

// Only keeps the workloads named and refuses a name the scenario lacks.
func TestOnlyKeepsTheNamedWorkloads(t *testing.T) {
	s, err := ParseScenario([]byte(twoStores), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Only([]string{"seq"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Expand() {
		got = append(got, fmt.Sprintf("%d %s %s %s", r.Round, r.Store, r.Workload.Name, r.System.Name))
	}
	want := []string{"1 loopback seq shardfs", "1 loopback seq direct", "2 loopback seq direct", "2 loopback seq shardfs"}
	if !slices.Equal(got, want) {
		t.Errorf("runs of workload seq alone:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := s.Only([]string{"au2"}); err == nil || !strings.Contains(err.Error(), `no workload "au2"`) {
		t.Errorf("Only of a workload the scenario lacks: %v; want an error naming it", err)
	}
}

// OnlyStores keeps the stores named and refuses one the scenario lacks.
func TestOnlyStoresKeepsTheNamedStores(t *testing.T) {
	s, err := ParseScenario([]byte(twoStores), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.OnlyStores([]string{"remote"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Expand() {
		if r.Store != "remote" || r.Workload.Name != "au" {
			t.Errorf("run of %s on %s after OnlyStores(remote): want only au (seq is loopback's alone) on remote", r.Workload.Name, r.Store)
		}
	}
	if len(s.Expand()) != 2*2*3 {
		t.Errorf("%d runs on the remote store, want 12 (2 rounds × 2 counts × 3 systems)", len(s.Expand()))
	}
	if err := s.OnlyStores([]string{"loopback"}); err == nil || !strings.Contains(err.Error(), `no store "loopback"`) {
		t.Errorf("OnlyStores of a store the scenario no longer uses: %v; want an error naming it", err)
	}
}

func TestExpandSetsTheSweptParameterPerRun(t *testing.T) {
	s, err := ParseScenario([]byte(twoStores), false)
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Expand()
	if runs[0].Params["accelerators"] != 4.0 || runs[3].Params["accelerators"] != 8.0 {
		t.Errorf("accelerators: %v then %v, want 4 then 8", runs[0].Params["accelerators"], runs[3].Params["accelerators"])
	}
	if _, ok := s.Workloads[0].Params["accelerators"]; ok {
		t.Error("the sweep wrote into the workload's own parameters")
	}
}

func TestSmokeSettingsLieOverTheFullOnes(t *testing.T) {
	full, err := ParseScenario([]byte(twoStores), false)
	if err != nil {
		t.Fatal(err)
	}
	smoke, err := ParseScenario([]byte(twoStores+"smoke: {rounds: 1, stores: [loopback]}\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if full.Datasets[0].Shards != 64 || smoke.Datasets[0].Shards != 2 || smoke.Datasets[0].SampleSize != "100KiB" {
		t.Errorf("data set: full %+v, smoke %+v", full.Datasets[0], smoke.Datasets[0])
	}
	if smoke.Rounds != 1 || !slices.Equal(smoke.Stores, []string{"loopback"}) || !slices.Equal(smoke.Workloads[0].Sweep.Values, []float64{1}) {
		t.Errorf("smoke scenario: rounds %d, stores %v, sweep %v", smoke.Rounds, smoke.Stores, smoke.Workloads[0].Sweep.Values)
	}
	if smoke.Workloads[0].Params["window_s"] != 2.0 || full.Workloads[0].Params["window_s"] != 30.0 {
		t.Errorf("window: smoke %v, full %v", smoke.Workloads[0].Params["window_s"], full.Workloads[0].Params["window_s"])
	}
	if len(smoke.Expand()) != 5 { // au at 1 accelerator on local, shardfs, rclone; seq on direct, shardfs
		t.Errorf("smoke runs: %d, want 5", len(smoke.Expand()))
	}
}

func TestScenarioErrorsNameWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"rounds: 2", "rounds: 0", "rounds: want at least 1"},
		{"kind: rclone", "kind: goofys", `system "rclone": unknown kind "goofys"`},
		{"dataset: shards, stores", "dataset: other, stores", `workload "seq": dataset "other" is not among`},
		{"systems: [direct, shardfs]", "systems: [direct, s3fs]", `workload "seq": system "s3fs" is not among`},
		{"sample_size: 100KiB", "sample_size: 100K", `size "100K": write bytes or a binary unit`},
		{"kind: seq", "kind: sequential", `workload "seq": unknown kind "sequential"`},
		{"rounds: 2", "rounds: 2\ncolour: red", `unknown field "colour"`},
		{"stores: [loopback, remote]", "stores: [loopback, s3]", `unknown store "s3"`},
		{"params: {model", "skip: [{system: rclone, store: remote}]\n    params: {model", `workload "au": a skip needs one of the scenario's systems, one of its stores and a reason`},
		{"params: {model", "skip: [{system: s3fs, store: remote, reason: slow}]\n    params: {model", `workload "au": a skip needs`},
	} {
		_, err := ParseScenario([]byte(strings.Replace(twoStores, tc.from, tc.to, 1)), false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: got %v, want an error containing %q", tc.from, tc.to, err, tc.want)
		}
	}
}

// Every scenario the project ships parses in both forms, and each workload
// of each builds its command: a typo in a file fails here, not an hour
// into a run.
func TestShippedScenariosParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, f := range files {
		for _, smoke := range []bool{false, true} {
			s, err := LoadScenario(f, smoke)
			if err != nil {
				t.Errorf("smoke=%v: %v", smoke, err)
				continue
			}
			if s.About == "" {
				t.Errorf("%s: no about line", f)
			}
			for _, r := range s.Expand() {
				if _, _, err := workloadCommand(r, target{Dir: "/mnt", Source: "s3://b/p", Shardfs: "shardfs", Root: ".", Python: "python3"}); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
		}
	}
}

func TestWorkloadCommands(t *testing.T) {
	s, err := ParseScenario([]byte(`
rounds: 1
stores: [loopback]
datasets:
  - {name: big, files: 1, file_size: 2GiB}
systems:
  - {name: direct, kind: direct}
  - {name: shardfs, kind: shardfs}
workloads:
  - {name: rand, kind: random, dataset: big, params: {readers: 2, size: 4KiB}}
  - {name: fio, kind: fio, dataset: big, sweep: {param: jobs, values: [4]}, params: {bs: 4k}}
  - {name: ls, kind: command, dataset: big, argv: ["ls", "-l", "{dir}"], figure: seconds, lower_is_better: true}
  - {name: bad, kind: seq, dataset: big, params: {readers: [1]}}
`), false)
	if err != nil {
		t.Fatal(err)
	}
	tg := target{Dir: "/m", Source: "s3://b/big", Shardfs: "/bin/shardfs", Root: "/src", Python: "/usr/bin/python3"}
	var got []string
	for _, r := range s.Expand() {
		argv, h, err := workloadCommand(r, tg)
		got = append(got, fmt.Sprintf("%s %s: %s [%s %v] %v", r.Workload.Name, r.System.Name, strings.Join(argv, " "), h.Figure, h.Higher, err))
	}
	want := []string{
		"rand direct: /bin/shardfs bench direct s3://b/big --workload random --readers 2 --random-size 4KiB --random-reads 200 --seed 1 [mbps true] <nil>",
		"rand shardfs: /bin/shardfs bench files /m --workload random --readers 2 --random-size 4KiB --random-reads 200 --seed 1 [mbps true] <nil>",
		"fio shardfs: fio --name=fio --filename=/m/file-000000.bin --rw=randread --bs=4k --numjobs=4 --size=536870912 --offset_increment=536870912 --ioengine=psync --invalidate=0 --runtime=60 --group_reporting --output-format=json [mibps true] <nil>",
		"ls shardfs: ls -l /m [seconds false] <nil>",
		`bad direct: /bin/shardfs bench direct s3://b/big --workload seq --readers 4 --concurrency 16 [mbps true] workload "bad": parameter readers: want a number or a string, got [1]`,
		`bad shardfs: /bin/shardfs bench files /m --workload seq --readers 4 --read-size 1MiB --range-size 0 [mbps true] workload "bad": parameter readers: want a number or a string, got [1]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseFigures(t *testing.T) {
	out := "epoch 0: 10 samples\nRESULT {\"dataset\": \"map\", \"ok\": true, \"epochs\": [{\"samples_per_second\": 812.5}]}\n"
	figs, err := parseFigures("command", []byte(out))
	if err != nil || figs["epochs.0.samples_per_second"] != 812.5 || figs["ok"] != 1 {
		t.Errorf("figures %v, %v", figs, err)
	}
	fio, err := os.ReadFile(filepath.Join("testdata", "fio.json"))
	if err != nil {
		t.Fatal(err)
	}
	figs, err = parseFigures("fio", fio)
	if err != nil || figs["mibps"] != 100 || figs["bytes"] != 1<<30 || figs["clat_p99_ms"] != 2 {
		t.Errorf("fio figures %v, %v", figs, err)
	}
	if _, err := parseFigures("fio", []byte("fio: file not found\n")); err == nil || !strings.Contains(err.Error(), "no JSON") {
		t.Errorf("fio without a report: %v", err)
	}
}

// A pass's deadline is the workload's timeout_s, else the scenario's,
// else derived from what bounds the workload: the accelerators' window,
// fio's runtime, the data set's size; the smoke settings lie over it.
func TestRunTimeout(t *testing.T) {
	const doc = `
rounds: 1
stores: [loopback]
datasets:
  - {name: big, files: 4, file_size: 1GiB}
systems:
  - {name: shardfs, kind: shardfs}
workloads:
  - {name: au, kind: accelerators, dataset: big, params: {window_s: 45}}
  - {name: au-default, kind: accelerators, dataset: big}
  - {name: fio, kind: fio, dataset: big, params: {runtime: "120"}}
  - {name: seq, kind: seq, dataset: big}
  - {name: own, kind: seq, dataset: big, timeout_s: 30, smoke: {timeout_s: 5}}
`
	timeouts := func(doc string, smoke bool) []string {
		t.Helper()
		s, err := ParseScenario([]byte(doc), smoke)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range s.Expand() {
			got = append(got, fmt.Sprintf("%s %s", r.Workload.Name, r.Timeout()))
		}
		return got
	}
	// 4 GiB at 10 MB/s is 429.5 s, rounded up.
	want := []string{"au 11m30s", "au-default 11m0s", "fio 14m0s", "seq 17m10s", "own 30s"}
	if got := timeouts(doc, false); !slices.Equal(got, want) {
		t.Errorf("derived timeouts %q, want %q", got, want)
	}
	want = []string{"au 1h0m0s", "au-default 1h0m0s", "fio 1h0m0s", "seq 1h0m0s", "own 5s"}
	if got := timeouts(doc+"timeout_s: 3600\n", true); !slices.Equal(got, want) {
		t.Errorf("with the scenario's timeout_s, smoke: %q, want %q", got, want)
	}
	for _, bad := range []string{doc + "timeout_s: -1\n", strings.Replace(doc, "timeout_s: 30", "timeout_s: -30", 1)} {
		if _, err := ParseScenario([]byte(bad), false); err == nil || !strings.Contains(err.Error(), "timeout_s must not be negative") {
			t.Errorf("a negative timeout_s: %v", err)
		}
	}
}
