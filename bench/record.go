package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Record is one measured row of `shardfs bench run`, one JSON object per
// line of results.jsonl. This type is the results format's only schema:
// docs/BENCHMARKS.md points here, and `shardfs bench report` reads nothing
// else. Sizes are bytes, times seconds, CPU user+system seconds.
type Record struct {
	Scenario string `json:"scenario"` // the scenario file's name
	Workload string `json:"workload"` // the workload's name in the scenario
	Kind     string `json:"kind"`     // seq, ttfb, random, fio, accelerators, command
	System   string `json:"system"`   // the system's name in the scenario (shardfs-ring, s3fs, ...)
	// SystemKind is shardfs, s3fs, rclone, local or direct.
	SystemKind string `json:"system_kind"`
	// Role is ceiling (the local copy or direct GETs: what a mount can
	// reach), peer (s3fs, rclone) or subject (shardfs).
	Role    string  `json:"role"`
	Store   string  `json:"store"` // loopback, or remote (Toxiproxy in front of MinIO)
	Dataset string  `json:"dataset"`
	Round   int     `json:"round"` // 1-based; systems take turns within each round
	Pass    int     `json:"pass"`  // 1-based pass over the same mount (second pass: warm)
	XName   string  `json:"x_name,omitempty"`
	X       float64 `json:"x,omitempty"` // the swept parameter (readers, accelerators)

	Figure         string  `json:"figure"` // name of the headline figure: mbps, ttfb_ms, au, ...
	Value          float64 `json:"value"`  // the headline figure
	HigherIsBetter bool    `json:"higher_is_better"`
	// Figures holds every number the workload printed, flattened with
	// dotted keys (epochs.0.samples_per_second).
	Figures map[string]float64 `json:"figures,omitempty"`

	WallSeconds  float64 `json:"wall_s"`            // the workload process, start to exit
	MountSeconds float64 `json:"mount_s,omitempty"` // mount command to the first listing
	BytesRead    int64   `json:"bytes_read"`        // bytes the readers got

	CPU CPU `json:"cpu_s"`
	// DaemonPeakRSS is the FUSE daemon's VmHWM at the end of the pass.
	DaemonPeakRSS int64 `json:"daemon_peak_rss_bytes,omitempty"`
	// StoreSentBytes is what MinIO wrote to its sockets during the pass
	// (/proc/PID/io wchar): every system's fetches counted the same way.
	StoreSentBytes int64 `json:"store_sent_bytes"`
	// DaemonFetchedBytes is shardfs' own count (shardfs_store_bytes_total).
	DaemonFetchedBytes int64 `json:"daemon_fetched_bytes,omitempty"`
	// DaemonServedBytes is what shardfs answered READs with during the
	// pass (shardfs_read_bytes_total): with DaemonFetchedBytes, what the
	// daemon fetched per byte it served over the same span, whatever the
	// workload counts as its own window.
	DaemonServedBytes int64 `json:"daemon_served_bytes,omitempty"`
	// DaemonUnreadBytes is what shardfs fetched during the pass and let go
	// with no read of it (shardfs_prefetch_unread_bytes_total, every
	// purpose): fetched less served, less what was still held at the end.
	DaemonUnreadBytes *int64 `json:"daemon_unread_bytes,omitempty"`
	// DaemonEvictedUnreadBytes is the part of it that eviction let go
	// while its readers still read (shardfs_prefetch_evicted_unread_bytes_total):
	// bytes fetched twice if the reader comes to them. Both are nil in
	// rows written before they were counted.
	DaemonEvictedUnreadBytes *int64 `json:"daemon_evicted_unread_bytes,omitempty"`

	LoadAvg [3]float64 `json:"load_avg"` // /proc/loadavg at the end of the pass
	// Tree is the tree the row's shardfs binary was built from, as its
	// --version names it (ParseVersion: the revision, "-dirty" for a tree
	// with uncommitted changes): the system's own binary for a shardfs
	// mount, the driver's for every other system (its workloads and cli
	// commands run it); "unknown" for a binary that names no revision.
	// Rows written before binaries were asked hold SourceTree's value.
	Tree string `json:"tree"`
	// SourceTree is `git describe --always --dirty` of the tree the driver
	// ran from (--root): the scripts, the Python package and
	// bench/accelerators.py the row used.
	SourceTree string  `json:"source_tree,omitempty"`
	Machine    Machine `json:"machine"`
	Started    string  `json:"started"` // RFC 3339
	// TimeoutSeconds is how long the pass's workload was given
	// (Run.Timeout) before the driver ended it.
	TimeoutSeconds float64 `json:"timeout_s,omitempty"`
	// Error is why the row failed, its figures then meaning nothing:
	// "timeout after Ns" (N is TimeoutSeconds) when the workload outlived
	// its deadline.
	Error string `json:"error,omitempty"`
	// Skipped is why the scenario does not run this row (a workload's
	// skip): the row has no figures and is not a failure.
	Skipped string `json:"skipped,omitempty"`
	// Teardown, on a row that timed out, lists in order what the driver
	// did to end the pass: the readers killed, where a shardfs daemon's
	// goroutine dump went, how it unmounted, whether it killed the daemon
	// or aborted the FUSE connection, and whether the readers were gone.
	Teardown []string `json:"teardown,omitempty"`
}

// CPU is the CPU seconds each party spent during one pass.
type CPU struct {
	Daemon  float64 `json:"daemon"`
	Store   float64 `json:"store"` // MinIO
	Proxy   float64 `json:"proxy"` // Toxiproxy, remote store only
	Readers float64 `json:"readers"`
}

// Machine names the box a record was taken on.
type Machine struct {
	Host     string `json:"host"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	MemBytes int64  `json:"mem_bytes"`
	Kernel   string `json:"kernel"`
}

func (m Machine) String() string {
	return fmt.Sprintf("%s, %d CPUs (%s), %.0f GiB RAM, Linux %s", m.Host, m.CPUs, m.CPUModel, float64(m.MemBytes)/(1<<30), m.Kernel)
}

// ReadRecords reads JSON-lines records from each file in turn.
func ReadRecords(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		recs, err := decodeRecords(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

func decodeRecords(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}
