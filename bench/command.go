package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// target is where one run's workload reads, and what its commands need.
type target struct {
	Dir     string // the mountpoint, or the local copy
	Data    string // the local copy
	Tmp     string // an empty directory of this run's
	Source  string // s3://BUCKET/DATASET
	Shardfs string // the shardfs binary
	Root    string // the source tree (scripts, bench/accelerators.py)
	Python  string // Debian's interpreter, the one with torch
	PID     int    // the daemon serving Dir; 0 without one
}

// headline names a workload's headline figure and its direction.
type headline struct {
	Figure string
	Higher bool
}

// workloadCommand is the argv of one run's workload process and its
// headline figure. Parameters not given take the defaults named here; a
// parameter of the wrong type is an error naming it.
func workloadCommand(r Run, t target) ([]string, headline, error) {
	p := params{name: r.Workload.Name, m: r.Params}
	var argv []string
	var h headline
	switch k := r.Workload.Kind; k {
	case "seq", "ttfb", "random":
		if r.System.Kind == "direct" {
			argv = []string{t.Shardfs, "bench", "direct", t.Source}
		} else {
			argv = []string{t.Shardfs, "bench", "files", t.Dir}
		}
		argv = append(argv, "--workload", k, "--readers", p.str("readers", "4"))
		switch k {
		case "seq":
			h = headline{"mbps", true}
			if r.System.Kind == "direct" {
				argv = append(argv, "--concurrency", p.str("concurrency", "16"))
				if ps := p.str("part_size", ""); ps != "" {
					argv = append(argv, "--part-size", ps)
				}
			} else {
				argv = append(argv, "--read-size", p.str("read_size", "1MiB"), "--range-size", p.str("range_size", "0"))
			}
		case "ttfb":
			h = headline{"ttfb_ms", false}
			argv = append(argv, "--opens", p.str("opens", "20"), "--ttfb-size", p.str("ttfb_size", "4KiB"))
		case "random":
			h = headline{"mbps", true}
			argv = append(argv, "--random-size", p.str("size", "1MiB"), "--random-reads", p.str("reads", "200"),
				"--seed", p.str("seed", "1"))
		}
	case "fio":
		jobs := p.int("jobs", 1)
		size := r.Dataset.Bytes()
		if r.Dataset.Files > 0 {
			size /= int64(r.Dataset.Files)
		}
		slice := size / int64(jobs)
		argv = []string{"fio", "--name=" + r.Workload.Name, "--filename=" + filepath.Join(t.Dir, p.str("file", datasetFile(0))),
			"--rw=" + p.str("rw", "randread"), "--bs=" + p.str("bs", "256k"), "--numjobs=" + strconv.Itoa(jobs),
			"--size=" + strconv.FormatInt(slice, 10), "--offset_increment=" + strconv.FormatInt(slice, 10),
			"--ioengine=psync", "--invalidate=0", "--runtime=" + p.str("runtime", defaultRuntime),
			"--group_reporting", "--output-format=json"}
		h = headline{"mibps", true}
	case "accelerators":
		argv = []string{t.Python, filepath.Join(t.Root, "bench", "accelerators.py"), t.Dir,
			"--model", p.str("model", "resnet50"), "--accelerators", p.str("accelerators", "1"),
			"--batch", p.str("batch", "32"), "--compute-time", p.str("compute_time", "0.1"),
			"--workers", p.str("workers", "2"), "--window", p.str("window_s", defaultWindowS)}
		h = headline{"au", true}
	case "command":
		repl := strings.NewReplacer("{dir}", t.Dir, "{data}", t.Data, "{tmp}", t.Tmp, "{source}", t.Source, "{shardfs}", t.Shardfs,
			"{root}", t.Root, "{python}", t.Python, "{pid}", strconv.Itoa(t.PID))
		for _, a := range r.Workload.Argv {
			argv = append(argv, repl.Replace(a))
		}
		h = headline{"wall_s", false}
		if r.Workload.Figure != "" {
			h = headline{r.Workload.Figure, !r.Workload.Lower}
		}
	}
	return argv, h, p.err
}

// The defaults of the parameters that bound a workload's time, shared by
// its command and its timeout.
const (
	defaultWindowS = "30" // accelerators: the measured window, seconds
	defaultRuntime = "60" // fio: its runtime cap, seconds
)

// What a pass's timeout is made of when the scenario names none:
// timeoutBase for what every workload does besides its own reading
// (interpreters and DataLoader workers starting, a cold mount's first
// opens through the remote store, a daemon's counters read at the end),
// and on top of it the reading its parameters bound. slowestRate is well
// under what one stream of a peer gets through the remote store the
// scenarios emulate, so that a slow system still finishes while a stuck
// one is ended.
const (
	timeoutBase = 10 * time.Minute
	slowestRate = 10e6 // bytes per second
)

// Timeout is how long one pass of r's workload may run before the driver
// ends it: the workload's timeout_s, else the scenario's, else
// timeoutBase plus twice the accelerators' measured window, twice fio's
// runtime, or, for every other kind, the data set read whole at
// slowestRate. Always whole seconds, as the records name it.
func (r Run) Timeout() time.Duration {
	switch {
	case r.Workload.TimeoutS > 0:
		return wholeSeconds(r.Workload.TimeoutS)
	case r.Scenario.TimeoutS > 0:
		return wholeSeconds(r.Scenario.TimeoutS)
	}
	p := params{name: r.Workload.Name, m: r.Params}
	switch r.Workload.Kind {
	case "accelerators":
		return timeoutBase + wholeSeconds(2*p.float("window_s", defaultWindowS))
	case "fio":
		return timeoutBase + wholeSeconds(2*p.float("runtime", defaultRuntime))
	}
	return timeoutBase + wholeSeconds(float64(r.Dataset.Bytes())/slowestRate)
}

// wholeSeconds is s seconds, rounded up to a whole second.
func wholeSeconds(s float64) time.Duration { return time.Duration(math.Ceil(s)) * time.Second }

// datasetFile is the name of a files data set's i-th object.
func datasetFile(i int) string { return fmt.Sprintf("file-%06d.bin", i) }

// params reads a workload's parameters; the first bad one is kept in err.
type params struct {
	name string
	m    map[string]any
	err  error
}

func (p *params) str(key, def string) string {
	v, ok := p.m[key]
	if !ok {
		return def
	}
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if p.err == nil {
		p.err = fmt.Errorf("workload %q: parameter %s: want a number or a string, got %v", p.name, key, v)
	}
	return def
}

// float is a non-negative number; a bad one is workloadCommand's error to
// report, and reads as def here.
func (p *params) float(key, def string) float64 {
	d, _ := strconv.ParseFloat(def, 64)
	v, err := strconv.ParseFloat(p.str(key, def), 64)
	if err != nil || v < 0 {
		return d
	}
	return v
}

func (p *params) int(key string, def int) int {
	s := p.str(key, strconv.Itoa(def))
	n, err := strconv.Atoi(s)
	if (err != nil || n < 1) && p.err == nil {
		p.err = fmt.Errorf("workload %q: parameter %s: want a positive whole number, got %q", p.name, key, s)
		return def
	}
	return n
}

// parseFigures finds the last line of out that is a JSON object (after an
// optional "RESULT " prefix) and flattens its numbers into dotted keys.
// fio's report is one JSON document, which gets its own reading.
func parseFigures(kind string, out []byte) (map[string]float64, error) {
	if kind == "fio" {
		return fioFigures(out)
	}
	var last map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "RESULT ")
		var obj map[string]any
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &obj) == nil {
			last = obj
		}
	}
	if last == nil {
		return map[string]float64{}, nil
	}
	figs := map[string]float64{}
	flatten("", last, figs)
	return figs, nil
}

func flatten(prefix string, v any, out map[string]float64) {
	switch v := v.(type) {
	case float64:
		out[prefix] = v
	case bool:
		out[prefix] = map[bool]float64{false: 0, true: 1}[v]
	case map[string]any:
		for k, x := range v {
			flatten(strings.TrimPrefix(prefix+"."+k, "."), x, out)
		}
	case []any:
		for i, x := range v {
			flatten(strings.TrimPrefix(prefix+"."+strconv.Itoa(i), "."), x, out)
		}
	}
}

// fioFigures reads the aggregate of fio's group-reported JSON: MiB/s, IOPS,
// bytes and completion-latency percentiles.
func fioFigures(out []byte) (map[string]float64, error) {
	i := bytes.IndexByte(out, '{') // fio may print notes before its JSON
	if i < 0 {
		return nil, fmt.Errorf("fio printed no JSON report")
	}
	var rep struct {
		Jobs []struct {
			Read struct {
				BwBytes float64 `json:"bw_bytes"`
				IOPS    float64 `json:"iops"`
				IOBytes float64 `json:"io_bytes"`
				Clat    struct {
					Percentile map[string]float64 `json:"percentile"`
				} `json:"clat_ns"`
			} `json:"read"`
			Error int `json:"error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out[i:], &rep); err != nil {
		return nil, fmt.Errorf("fio's JSON report: %w", err)
	}
	if len(rep.Jobs) == 0 {
		return nil, fmt.Errorf("fio's JSON report has no jobs")
	}
	j := rep.Jobs[0]
	if j.Error != 0 {
		return nil, fmt.Errorf("fio job failed with error %d", j.Error)
	}
	return map[string]float64{
		"mibps": j.Read.BwBytes / (1 << 20), "iops": j.Read.IOPS, "bytes": j.Read.IOBytes,
		"clat_p50_ms": j.Read.Clat.Percentile["50.000000"] / 1e6, "clat_p99_ms": j.Read.Clat.Percentile["99.000000"] / 1e6,
	}, nil
}

// figureOf is the named figure, or NaN when the workload did not print it.
func figureOf(figs map[string]float64, name string) float64 {
	if v, ok := figs[name]; ok {
		return v
	}
	return math.NaN()
}
