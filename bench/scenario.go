package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"sigs.k8s.io/yaml"
)

// Scenario is one file under bench/scenarios: systems x data sets x
// workloads x stores x rounds, as data. Expand turns it into the ordered
// list of runs the driver carries out.
type Scenario struct {
	Name   string `json:"name"`
	About  string `json:"about"`  // one line: what the scenario shows
	Rounds int    `json:"rounds"` // every run is repeated this many times, interleaved
	// Stores are loopback (MinIO on 127.0.0.1) and remote (Toxiproxy in
	// front of the same MinIO, with Remote's latency and rate).
	Stores    []string   `json:"stores"`
	Remote    Remote     `json:"remote"`
	Datasets  []Dataset  `json:"datasets"`
	Systems   []System   `json:"systems"`
	Workloads []Workload `json:"workloads"`
	// TimeoutS is how long one pass of any workload may run, in seconds,
	// unless the workload gives its own; without either, Run.Timeout
	// derives one from the workload's parameters.
	TimeoutS float64 `json:"timeout_s,omitempty"`
}

// Remote is the shape of the emulated remote store.
type Remote struct {
	LatencyMS int `json:"latency_ms"` // added to every response
	RateKBps  int `json:"rate_kbps"`  // cap per connection, KB/s
}

// Dataset is generated once under .work/bench-data and uploaded to the
// bucket under its name: tar shards (Shards x Samples x SampleSize, by
// scripts/gen_shards.py) or Files objects of FileSize random bytes.
type Dataset struct {
	Name       string `json:"name"`
	Shards     int    `json:"shards,omitempty"`
	Samples    int    `json:"samples,omitempty"`
	SampleSize string `json:"sample_size,omitempty"`
	Files      int    `json:"files,omitempty"`
	FileSize   string `json:"file_size,omitempty"`
}

// System is one way of reading the data set.
type System struct {
	Name string `json:"name"`
	// Kind is shardfs, s3fs, rclone (mounts), local (the generated copy on
	// disk, no FUSE), direct (ranged GETs by `shardfs bench direct`, which
	// runs only the seq, ttfb and random workloads) or cli (no mount: a
	// command workload that runs a shardfs command against the store).
	Kind  string   `json:"kind"`
	Flags []string `json:"flags,omitempty"` // appended to the mount command
	// Binary is another shardfs binary to mount with (A/B runs of two
	// trees); $VARS in it are expanded. Default: the driver's own.
	Binary string `json:"binary,omitempty"`
	// Cache gives a shardfs mount a cache dir: empty for every run, or
	// filled once by `shardfs warm` and kept when Warm is set.
	Cache     bool   `json:"cache,omitempty"`
	Warm      bool   `json:"warm,omitempty"`
	CacheSize string `json:"cache_size,omitempty"`
}

// Workload is what the readers do on each mounted system.
type Workload struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"` // seq, ttfb, random, fio, accelerators, command
	Dataset string `json:"dataset"`
	// Systems and Stores narrow the scenario's lists for this workload.
	Systems []string `json:"systems,omitempty"`
	Stores  []string `json:"stores,omitempty"`
	// Passes over the same mount; the page cache is dropped before each
	// one unless KeepPageCache is set.
	Passes        int  `json:"passes,omitempty"`
	KeepPageCache bool `json:"keep_page_cache,omitempty"`
	// Sweep runs the workload once per value of one parameter.
	Sweep  *Sweep         `json:"sweep,omitempty"`
	Params map[string]any `json:"params,omitempty"`
	// TimeoutS overrides the scenario's TimeoutS for this workload.
	TimeoutS float64 `json:"timeout_s,omitempty"`
	// Skip names systems this workload is not run on through one store,
	// each with the reason the tables print in its place.
	Skip []Skip `json:"skip,omitempty"`
	// Argv, Figure and Lower belong to the command kind: the command is
	// run with {dir} (what to read), {data} (the local copy), {source}
	// (s3://BUCKET/DATASET), {shardfs} (the binary), {python}, {root} (the
	// tree), {pid} (the daemon) and {tmp} (an empty directory per run, the
	// same for all its passes) replaced; its last line that is a JSON object gives the figures, and
	// Figure names the headline one (default: wall_s, lower is better).
	Argv   []string `json:"argv,omitempty"`
	Figure string   `json:"figure,omitempty"`
	Lower  bool     `json:"lower_is_better,omitempty"`
}

// Skip is a system a workload is not run on through a store, and why.
type Skip struct {
	System string `json:"system"`
	Store  string `json:"store"`
	Reason string `json:"reason"`
}

// Sweep is a parameter and the values it takes.
type Sweep struct {
	Param  string    `json:"param"`
	Values []float64 `json:"values"`
}

// Run is one measurement: a system running a workload on one store, in
// one round, at one value of the sweep.
type Run struct {
	Scenario *Scenario
	Round    int
	Store    string
	Workload *Workload
	Dataset  *Dataset
	System   *System
	X        float64
	Params   map[string]any // the workload's, with the swept one set
	// Skipped is why the run is recorded without running (Workload.Skip).
	Skipped string
}

var (
	workloadKinds = []string{"seq", "ttfb", "random", "fio", "accelerators", "command"}
	systemKinds   = []string{"shardfs", "s3fs", "rclone", "local", "direct", "cli"}
	storeNames    = []string{"loopback", "remote"}
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
)

// LoadScenario reads a scenario file (YAML or JSON). With smoke set, every
// object's "smoke" member is laid over the object first, so one file holds
// both the full run and a seconds-long check that every part of it works.
func LoadScenario(path string, smoke bool) (*Scenario, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(raw, smoke)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return s, nil
}

// ParseScenario decodes and checks one scenario; unknown fields are errors.
func ParseScenario(raw []byte, smoke bool) (*Scenario, error) {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(j, &tree); err != nil {
		return nil, err
	}
	j, _ = json.Marshal(applySmoke(tree, smoke))
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// applySmoke lays each object's "smoke" member over it (when smoke is set)
// and drops the member.
func applySmoke(v any, smoke bool) any {
	switch v := v.(type) {
	case map[string]any:
		over, _ := v["smoke"].(map[string]any)
		delete(v, "smoke")
		if smoke {
			for k, x := range over {
				v[k] = x
			}
		}
		for k, x := range v {
			v[k] = applySmoke(x, smoke)
		}
	case []any:
		for i, x := range v {
			v[i] = applySmoke(x, smoke)
		}
	}
	return v
}

func (s *Scenario) check() error {
	if s.Rounds < 1 {
		return fmt.Errorf("rounds: want at least 1, got %d", s.Rounds)
	}
	if len(s.Stores) == 0 {
		return fmt.Errorf("stores: name loopback, remote or both")
	}
	for _, st := range s.Stores {
		if !slices.Contains(storeNames, st) {
			return fmt.Errorf("stores: unknown store %q (want loopback or remote)", st)
		}
	}
	if s.TimeoutS < 0 {
		return fmt.Errorf("timeout_s must not be negative")
	}
	if slices.Contains(s.Stores, "remote") && (s.Remote.LatencyMS < 0 || s.Remote.RateKBps <= 0) {
		return fmt.Errorf("remote: rate_kbps must be positive and latency_ms not negative")
	}
	datasets := map[string]bool{}
	for _, d := range s.Datasets {
		if err := d.check(); err != nil {
			return fmt.Errorf("dataset %q: %w", d.Name, err)
		}
		if datasets[d.Name] {
			return fmt.Errorf("dataset %q: named twice", d.Name)
		}
		datasets[d.Name] = true
	}
	systems := map[string]bool{}
	for _, y := range s.Systems {
		if !namePattern.MatchString(y.Name) || systems[y.Name] {
			return fmt.Errorf("system %q: want a unique lower-case name", y.Name)
		}
		if !slices.Contains(systemKinds, y.Kind) {
			return fmt.Errorf("system %q: unknown kind %q (want one of %s)", y.Name, y.Kind, strings.Join(systemKinds, ", "))
		}
		if (y.Cache || y.Warm || y.Binary != "") && y.Kind != "shardfs" {
			return fmt.Errorf("system %q: cache, warm and binary are shardfs settings", y.Name)
		}
		if y.Warm && !y.Cache {
			return fmt.Errorf("system %q: warm needs cache", y.Name)
		}
		if y.CacheSize != "" {
			if _, err := ParseSize(y.CacheSize); err != nil {
				return fmt.Errorf("system %q: cache_size: %w", y.Name, err)
			}
		}
		systems[y.Name] = true
	}
	names := map[string]bool{}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		if !namePattern.MatchString(w.Name) || names[w.Name] {
			return fmt.Errorf("workload %q: want a unique lower-case name", w.Name)
		}
		names[w.Name] = true
		if !slices.Contains(workloadKinds, w.Kind) {
			return fmt.Errorf("workload %q: unknown kind %q (want one of %s)", w.Name, w.Kind, strings.Join(workloadKinds, ", "))
		}
		if !datasets[w.Dataset] {
			return fmt.Errorf("workload %q: dataset %q is not among the scenario's datasets", w.Name, w.Dataset)
		}
		for _, y := range w.Systems {
			if !systems[y] {
				return fmt.Errorf("workload %q: system %q is not among the scenario's systems", w.Name, y)
			}
		}
		for _, st := range w.Stores {
			if !slices.Contains(s.Stores, st) {
				return fmt.Errorf("workload %q: store %q is not among the scenario's stores", w.Name, st)
			}
		}
		for _, k := range w.Skip {
			if !systems[k.System] || !slices.Contains(s.Stores, k.Store) || k.Reason == "" {
				return fmt.Errorf("workload %q: a skip needs one of the scenario's systems, one of its stores and a reason", w.Name)
			}
		}
		if w.Passes < 0 || w.TimeoutS < 0 {
			return fmt.Errorf("workload %q: passes and timeout_s must not be negative", w.Name)
		}
		if w.Sweep != nil && (w.Sweep.Param == "" || len(w.Sweep.Values) == 0) {
			return fmt.Errorf("workload %q: sweep needs a param and values", w.Name)
		}
		if (w.Kind == "command") != (len(w.Argv) > 0) {
			return fmt.Errorf("workload %q: argv is for the command kind, and the command kind needs it", w.Name)
		}
	}
	return nil
}

func (d Dataset) check() error {
	if !namePattern.MatchString(d.Name) {
		return fmt.Errorf("want a lower-case name")
	}
	tar := d.Shards > 0 || d.Samples > 0 || d.SampleSize != ""
	files := d.Files > 0 || d.FileSize != ""
	switch {
	case tar == files:
		return fmt.Errorf("give either shards, samples and sample_size or files and file_size")
	case tar && (d.Shards < 1 || d.Samples < 1):
		return fmt.Errorf("shards and samples must be at least 1")
	case files && d.Files < 1:
		return fmt.Errorf("files must be at least 1")
	}
	_, err := ParseSize(d.SampleSize + d.FileSize)
	return err
}

// Bytes is the data set's size, counting sample payloads only for tar shards.
func (d Dataset) Bytes() int64 {
	n, _ := ParseSize(d.SampleSize + d.FileSize)
	if d.Files > 0 {
		return int64(d.Files) * n
	}
	return int64(d.Shards*d.Samples) * n
}

// ParseSize reads a size written in bytes or with a binary suffix (96KiB,
// 2GiB): "K" alone would be ambiguous between the scripts and the CLI.
func ParseSize(s string) (int64, error) {
	if strings.Trim(s, "0123456789") != "" && !strings.HasSuffix(s, "iB") {
		return 0, fmt.Errorf("size %q: write bytes or a binary unit (KiB, MiB, GiB)", s)
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("size %q: want a positive size", s)
	}
	return int64(n), nil
}

// Only keeps the workloads named, in file order; a name the scenario does
// not have is an error.
func (s *Scenario) Only(names []string) error {
	var kept []Workload
	for _, name := range names {
		if !slices.ContainsFunc(s.Workloads, func(w Workload) bool { return w.Name == name }) {
			return fmt.Errorf("scenario %s has no workload %q", s.Name, name)
		}
	}
	for _, w := range s.Workloads {
		if slices.Contains(names, w.Name) {
			kept = append(kept, w)
		}
	}
	s.Workloads = kept
	return nil
}

// OnlyStores narrows s to the named stores, which it must use.
func (s *Scenario) OnlyStores(names []string) error {
	for _, name := range names {
		if !slices.Contains(s.Stores, name) {
			return fmt.Errorf("scenario %s uses no store %q (it uses %s)", s.Name, name, strings.Join(s.Stores, ", "))
		}
	}
	s.Stores = slices.DeleteFunc(s.Stores, func(st string) bool { return !slices.Contains(names, st) })
	return nil
}

// Expand lists the runs in the order the driver takes them: round by
// round; within a round, store, workload and sweep value in file order;
// at each point every system once, starting one later each round so that
// no system always goes first on a cold box.
func (s *Scenario) Expand() []Run {
	var runs []Run
	for round := 1; round <= s.Rounds; round++ {
		for _, store := range s.Stores {
			for i := range s.Workloads {
				w := &s.Workloads[i]
				if len(w.Stores) > 0 && !slices.Contains(w.Stores, store) {
					continue
				}
				systems := s.systemsFor(w)
				if len(systems) == 0 {
					continue
				}
				k := (round - 1) % len(systems)
				systems = append(systems[k:], systems[:k]...)
				xs := []float64{0}
				if w.Sweep != nil {
					xs = w.Sweep.Values
				}
				for _, x := range xs {
					params := map[string]any{}
					for k, v := range w.Params {
						params[k] = v
					}
					if w.Sweep != nil {
						params[w.Sweep.Param] = x
					}
					for _, y := range systems {
						runs = append(runs, Run{Scenario: s, Round: round, Store: store, Workload: w,
							Dataset: s.dataset(w.Dataset), System: y, X: x, Params: params, Skipped: w.skipped(y.Name, store)})
					}
				}
			}
		}
	}
	return runs
}

// skipped is why the workload is not run on system through store, or "".
func (w *Workload) skipped(system, store string) string {
	for _, k := range w.Skip {
		if k.System == system && k.Store == store {
			return k.Reason
		}
	}
	return ""
}

// systemsFor lists the systems a workload runs on: its own list or all,
// without direct GETs for workloads that read files.
func (s *Scenario) systemsFor(w *Workload) []*System {
	var out []*System
	for i := range s.Systems {
		y := &s.Systems[i]
		if len(w.Systems) > 0 && !slices.Contains(w.Systems, y.Name) {
			continue
		}
		if y.Kind == "direct" && !slices.Contains([]string{"seq", "ttfb", "random"}, w.Kind) {
			continue
		}
		out = append(out, y)
	}
	return out
}

func (s *Scenario) dataset(name string) *Dataset {
	for i := range s.Datasets {
		if s.Datasets[i].Name == name {
			return &s.Datasets[i]
		}
	}
	return nil
}

// Role is what a system is in the tables: the ceiling, a peer or the subject.
func (y *System) Role() string {
	switch y.Kind {
	case "local", "direct":
		return "ceiling"
	case "s3fs", "rclone":
		return "peer"
	}
	return "subject"
}

// Mounts reports whether the system is a FUSE mount the driver starts.
func (y *System) Mounts() bool { return y.Kind == "shardfs" || y.Kind == "s3fs" || y.Kind == "rclone" }
