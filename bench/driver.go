package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/metrics"
)

// Options are the driver's settings, the same for every scenario of a run.
type Options struct {
	Root    string // the source tree: scripts/, bench/, .tools/bin, .work
	Out     string // results.jsonl, logs/, the mountpoint, cache dirs
	Shardfs string // the binary measured (and running bench files/direct)
	Python  string // Debian's python3, with torch
	Lock    string // held for the whole run, so benchmarks never overlap
	Log     io.Writer
	// Profile: every shardfs daemon records a CPU profile from mount to
	// unmount and writes its allocation profile at unmount
	// (SHARDFS_CPUPROFILE, SHARDFS_MEMPROFILE) in OUT/profiles, named for
	// its pass.
	Profile bool
}

// Fixed credentials of the throwaway MinIO the driver starts (the same as
// scripts/lib.sh's); bucket holds every data set under its own prefix.
const (
	accessKey = "shardfs-test"
	secretKey = "shardfs-test-secret"
	region    = "us-east-1"
	bucket    = "bench"
)

// Drive runs every scenario, appending a record per measured pass to
// OUT/results.jsonl. It takes the lock first and waits for it, starts
// MinIO (and Toxiproxy for remote stores), generates and uploads the data
// sets it lacks, and stops and unmounts everything it started, also when
// a run fails. A failed run is recorded with its error and the driver
// goes on, a pass past its deadline too (await); the error returned
// names how many failed.
func Drive(ctx context.Context, o Options, scenarios []*Scenario) error {
	unlock, err := lock(o.Lock, o.Log)
	if err != nil {
		return err
	}
	defer unlock()
	for _, dir := range []string{o.Out, filepath.Join(o.Out, "logs"), filepath.Join(o.Out, "mnt"), filepath.Join(o.Out, "tmp")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	res, err := os.OpenFile(filepath.Join(o.Out, "results.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer res.Close()
	d := newDriver(o, res)
	minio, err := startMinIO(ctx, o)
	if err != nil {
		return err
	}
	defer minio.stop()
	d.minio = minio
	failed, total := 0, 0
	for _, s := range scenarios {
		f, n, err := d.scenario(ctx, s)
		failed, total = failed+f, total+n
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
	}
	fmt.Fprintf(o.Log, "%d rows recorded in %s\n", total, res.Name())
	if failed > 0 {
		return fmt.Errorf("%d of %d rows failed; their records name the error", failed, total)
	}
	return nil
}

func newDriver(o Options, results io.Writer) *driver {
	return &driver{o: o, results: json.NewEncoder(results), mnt: filepath.Join(o.Out, "mnt"), source: gitDescribe(o.Root),
		trees: map[string]string{}, machine: thisMachine(), uploaded: map[string]bool{}, warmed: map[string]bool{},
		start: startReaders, dropCaches: dropCaches}
}

type driver struct {
	o        Options
	results  *json.Encoder // one write per row: a row is in the file once it is measured
	mnt      string
	source   string            // git describe of o.Root
	trees    map[string]string // the tree of each shardfs binary measured, by path
	machine  Machine
	minio    *server
	proxy    *server
	proxyURL string
	uploaded map[string]bool // data set prefixes in the bucket
	warmed   map[string]bool // cache dirs filled by shardfs warm
	// start starts a pass's workload (startReaders) and dropCaches drops
	// the page cache: the tests' stand-ins touch no process and no
	// cache of the box.
	start      func(*exec.Cmd) (proc, error)
	dropCaches func() error
}

func (d *driver) scenario(ctx context.Context, s *Scenario) (failed, total int, err error) {
	start := time.Now()
	if containsStore(s, "remote") {
		proxy, url, err := startToxiproxy(ctx, d.o, d.minio.url, s.Remote)
		if err != nil {
			return 0, 0, err
		}
		defer proxy.stop()
		d.proxy, d.proxyURL = proxy, url
		defer func() { d.proxy, d.proxyURL = nil, "" }()
	}
	for i := range s.Datasets {
		if err := d.prepare(ctx, &s.Datasets[i]); err != nil {
			return 0, 0, fmt.Errorf("data set %s: %w", s.Datasets[i].Name, err)
		}
	}
	runs := s.Expand()
	for i, r := range runs {
		if ctx.Err() != nil {
			return failed, total, ctx.Err()
		}
		fmt.Fprintf(d.o.Log, "[%s %d/%d] round %d, %s store, %s on %s%s\n", s.Name, i+1, len(runs), r.Round, r.Store,
			r.Workload.Name, r.System.Name, xLabel(r))
		err := d.run(ctx, r, func(rec Record) error {
			total++
			switch {
			case rec.Skipped != "":
				fmt.Fprintf(d.o.Log, "  not run: %s\n", rec.Skipped)
			case rec.Error != "":
				failed++
				fmt.Fprintf(d.o.Log, "  failed: %s\n", rec.Error)
				for _, step := range rec.Teardown {
					fmt.Fprintf(d.o.Log, "    %s\n", step)
				}
			default:
				fmt.Fprintf(d.o.Log, "  pass %d: %s %.4g\n", rec.Pass, rec.Figure, rec.Value)
			}
			return d.results.Encode(rec)
		})
		if err != nil {
			return failed, total, err
		}
	}
	fmt.Fprintf(d.o.Log, "scenario %s: %d runs in %.0f s\n", s.Name, len(runs), time.Since(start).Seconds())
	return failed, total, nil
}

func xLabel(r Run) string {
	if r.Workload.Sweep == nil {
		return ""
	}
	return fmt.Sprintf(", %s=%g", r.Workload.Sweep.Param, r.X)
}

func containsStore(s *Scenario, name string) bool {
	for _, st := range s.Stores {
		if st == name {
			return true
		}
	}
	return false
}

// datasetDir is where a data set is generated: named by its spec, so a
// changed size never reads an old copy.
func (d *driver) datasetDir(ds *Dataset) string {
	spec, _ := json.Marshal(ds)
	sum := sha256.Sum256(spec)
	return filepath.Join(d.o.Root, ".work", "bench-data", ds.Name+"-"+hex.EncodeToString(sum[:4]))
}

// prefix is the data set's place in the bucket.
func (d *driver) prefix(ds *Dataset) string { return filepath.Base(d.datasetDir(ds)) }

// prepare generates the data set once (kept under .work for later runs)
// and uploads it to this run's MinIO.
func (d *driver) prepare(ctx context.Context, ds *Dataset) error {
	dir := d.datasetDir(ds)
	if _, err := os.Stat(filepath.Join(dir, ".done")); err != nil {
		if err := needRoom(filepath.Dir(dir), ds.Bytes()*3); err != nil {
			return err
		}
		fmt.Fprintf(d.o.Log, "generating %s in %s\n", ds.Name, dir)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := generate(ctx, d.o, ds, dir); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, ".done"), nil, 0o644); err != nil {
			return err
		}
	}
	if d.uploaded[d.prefix(ds)] {
		return nil
	}
	if err := needRoom(os.TempDir(), ds.Bytes()); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(d.o.Root, "scripts", "upload.sh"), dir, "s3://"+bucket+"/"+d.prefix(ds))
	cmd.Env = d.storeEnv(d.minio.url)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("upload: %v\n%s", err, out)
	}
	d.uploaded[d.prefix(ds)] = true
	return nil
}

// generate writes tar shards with scripts/gen_shards.py, or objects of
// seeded random bytes.
func generate(ctx context.Context, o Options, ds *Dataset, dir string) error {
	if ds.Shards > 0 {
		size, _ := ParseSize(ds.SampleSize)
		out, err := exec.CommandContext(ctx, o.Python, filepath.Join(o.Root, "scripts", "gen_shards.py"), dir,
			strconv.Itoa(ds.Shards), strconv.Itoa(ds.Samples), strconv.FormatInt(size, 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("gen_shards.py: %v\n%s", err, out)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	size, _ := ParseSize(ds.FileSize)
	for i := range ds.Files {
		f, err := os.Create(filepath.Join(dir, datasetFile(i)))
		if err != nil {
			return err
		}
		src := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		_, err = io.CopyN(f, src, size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// needRoom stops with one line unless dir's file system has bytes free
// and 1 GiB to spare: a benchmark that fills the disk measures the full
// disk.
func needRoom(dir string, bytes int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	if free := int64(st.Bavail) * st.Bsize; free < bytes+1<<30 {
		return fmt.Errorf("%s has %d MiB free; the data set needs %d MiB and 1 GiB to spare", dir, free>>20, bytes>>20)
	}
	return nil
}

// storeEnv is the environment of every client of the store at url.
func (d *driver) storeEnv(url string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "SHARDFS_") && !strings.HasPrefix(kv, "RCLONE_") {
			env = append(env, kv)
		}
	}
	return append(env, "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey, "AWS_REGION="+region,
		"SHARDFS_ENDPOINT_URL="+url, "PYTHONPATH="+filepath.Join(d.o.Root, "python"))
}

func (d *driver) endpoint(store string) string {
	if store == "remote" {
		return d.proxyURL
	}
	return d.minio.url
}

// run carries out one run: mount (unless local or direct), then each pass
// with the page cache dropped, then unmount. Every pass gives a record,
// handed to emit as soon as it is measured; run returns emit's error.
func (d *driver) run(ctx context.Context, r Run, emit func(Record) error) error {
	base := Record{Scenario: r.Scenario.Name, Workload: r.Workload.Name, Kind: r.Workload.Kind, System: r.System.Name,
		SystemKind: r.System.Kind, Role: r.System.Role(), Store: r.Store, Dataset: r.Dataset.Name, Round: r.Round,
		SourceTree: d.source, Machine: d.machine, TimeoutSeconds: r.Timeout().Seconds()}
	if r.Workload.Sweep != nil {
		base.XName, base.X = r.Workload.Sweep.Param, r.X
	}
	fail := func(pass int, err error) error {
		rec := base
		rec.Pass, rec.Error, rec.Started = pass, err.Error(), time.Now().UTC().Format(time.RFC3339)
		return emit(rec)
	}
	if r.Skipped != "" {
		rec := base
		rec.Pass, rec.Skipped, rec.Started = 1, r.Skipped, time.Now().UTC().Format(time.RFC3339)
		return emit(rec)
	}
	bin, err := d.binary(r.System)
	if err != nil {
		return fail(1, err)
	}
	base.Tree = d.treeOf(ctx, bin)
	tmp, err := os.MkdirTemp(filepath.Join(d.o.Out, "tmp"), r.Workload.Name+".")
	if err != nil {
		return fail(1, err)
	}
	defer os.RemoveAll(tmp)
	t := target{Dir: d.datasetDir(r.Dataset), Data: d.datasetDir(r.Dataset), Tmp: tmp, Source: "s3://" + bucket + "/" + d.prefix(r.Dataset),
		Shardfs: d.o.Shardfs, Root: d.o.Root, Python: d.o.Python}
	var m *mount
	if r.System.Mounts() {
		if m, err = d.mount(ctx, r, bin); err != nil {
			return fail(1, err)
		}
		defer m.stop()
		t.Dir, t.PID, base.MountSeconds = d.mnt, m.cmd.Process.Pid, m.seconds
	}
	argv, h, err := workloadCommand(r, t)
	if err != nil {
		return fail(1, err)
	}
	base.Figure, base.HigherIsBetter = h.Figure, h.Higher
	passes := max(r.Workload.Passes, 1)
	for pass := 1; pass <= passes; pass++ {
		rec := base
		rec.Pass, rec.Started = pass, time.Now().UTC().Format(time.RFC3339)
		if pass == 1 || !r.Workload.KeepPageCache {
			if err := d.dropCaches(); err != nil {
				return fail(pass, err)
			}
		}
		if err := d.measure(ctx, r, argv, m, &rec); err != nil {
			rec.Error = err.Error()
		}
		if err := emit(rec); err != nil || rec.Error != "" {
			return err
		}
	}
	return nil
}

// binary is the shardfs binary a run of y measures: a shardfs system's
// own, else the driver's, whose workloads and commands the others run.
func (d *driver) binary(y *System) (string, error) {
	if y.Kind != "shardfs" || y.Binary == "" {
		return d.o.Shardfs, nil
	}
	bin := os.ExpandEnv(y.Binary)
	if bin == "" {
		return "", fmt.Errorf("system %s: binary %q expands to nothing", y.Name, y.Binary)
	}
	return bin, nil
}

// treeOf asks the binary at path for its tree once, saying so in the log
// when it names none.
func (d *driver) treeOf(ctx context.Context, path string) string {
	if tree, ok := d.trees[path]; ok {
		return tree
	}
	tree := binaryTree(ctx, path)
	if tree == unknownTree {
		fmt.Fprintf(d.o.Log, "%s names no VCS revision (built with -buildvcs=false, or in a git worktree): its rows say tree %s\n",
			path, unknownTree)
	}
	d.trees[path] = tree
	return tree
}

// passLog is the path of one pass's file of kind ext under OUT/logs:
// WORKLOAD.SYSTEM[.xX].roundR.passP.EXT, the sweep's value named where
// the workload sweeps one.
func (d *driver) passLog(r Run, rec *Record, ext string) string {
	x := ""
	if r.Workload.Sweep != nil {
		x = ".x" + strconv.FormatFloat(r.X, 'f', -1, 64)
	}
	return filepath.Join(d.o.Out, "logs", fmt.Sprintf("%s.%s%s.round%d.pass%d.%s", r.Workload.Name, r.System.Name, x, r.Round, rec.Pass, ext))
}

// measure runs the workload once and fills rec with what it and the
// parties around it spent. A workload that outlives its run's Timeout is
// ended (await) and measured no further.
func (d *driver) measure(ctx context.Context, r Run, argv []string, m *mount, rec *Record) error {
	daemon := 0
	if m != nil {
		daemon = m.cmd.Process.Pid
	}
	before := d.counters(daemon)
	logf, err := os.OpenFile(filepath.Join(d.o.Out, "logs", r.Workload.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "== %s round %d pass %d: %s\n", r.System.Name, r.Round, rec.Pass, strings.Join(argv, " "))
	var stdout bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = d.storeEnv(d.endpoint(r.Store)), d.o.Root
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, logf), logf
	start := time.Now()
	p, err := d.start(cmd)
	if err != nil {
		return err
	}
	h := &hungPass{r: p, m: m, shardfs: r.System.Kind == "shardfs", dump: d.passLog(r, rec, "goroutines")}
	teardown, err := await(ctx, h, r.Timeout())
	rec.WallSeconds, rec.LoadAvg, rec.Teardown = time.Since(start).Seconds(), loadAvg(), teardown
	if err != nil {
		// The readers may not have exited, and the daemon is gone:
		// nothing more of the pass is to be read.
		return err
	}
	after := d.counters(daemon)
	cpu, runErr := p.result()
	rec.CPU.Readers = cpu
	rec.CPU.Daemon, rec.CPU.Store, rec.CPU.Proxy = after.daemon-before.daemon, after.store-before.store, after.proxy-before.proxy
	rec.StoreSentBytes = after.sent - before.sent
	if m != nil {
		rec.DaemonPeakRSS = peakRSS(daemon)
		if r.System.Kind == "shardfs" {
			c, ok := shardfsCounters(d.mnt)
			if !ok {
				return fmt.Errorf("%s/.shardfs/stats did not answer within %s: the daemon is stuck", d.mnt, grace)
			}
			// Every counter, for the pass's story beyond its row (what
			// was passed through, made whole, skipped, evicted).
			if b, err := json.MarshalIndent(c, "", " "); err == nil {
				_ = os.WriteFile(d.passLog(r, rec, "stats.json"), b, 0o644)
			}
			now := passCounters{c["shardfs_store_bytes_total"], c["shardfs_read_bytes_total"],
				c["shardfs_prefetch_unread_bytes_total"], c["shardfs_prefetch_evicted_unread_bytes_total"]}
			rec.DaemonFetchedBytes, rec.DaemonServedBytes = now.fetched-m.last.fetched, now.served-m.last.served
			if _, ok := c["shardfs_prefetch_evicted_unread_bytes_total"]; ok { // a binary that counts them
				unread, evicted := now.unread-m.last.unread, now.evicted-m.last.evicted
				rec.DaemonUnreadBytes, rec.DaemonEvictedUnreadBytes = &unread, &evicted
			}
			m.last = now
		}
	}
	if runErr != nil {
		return fmt.Errorf("%s: %v (see %s)", argv[0], runErr, logf.Name())
	}
	figs, err := parseFigures(r.Workload.Kind, stdout.Bytes())
	if err != nil {
		return err
	}
	figs["wall_s"] = rec.WallSeconds
	rec.Figures = figs
	v, ok := figs[rec.Figure]
	if !ok {
		return fmt.Errorf("the workload printed no %s (see %s)", rec.Figure, logf.Name())
	}
	rec.Value, rec.BytesRead = v, int64(figs["bytes"])
	return nil
}

// hungPass is the driver's hung: a pass's readers and the mount they
// read, nil for a system without one.
type hungPass struct {
	r        proc
	m        *mount
	shardfs  bool   // the mount's daemon is shardfs, which dumps its goroutines on SIGQUIT
	dump     string // where saveDump keeps the dump
	dumpFrom int64  // the daemon log's size when it was asked
}

func (h *hungPass) killReaders()                   { h.r.kill() }
func (h *hungPass) readersExited() <-chan struct{} { return h.r.exited() }

func (h *hungPass) quitDaemon() <-chan struct{} {
	if h.m == nil || !h.shardfs {
		return nil
	}
	if st, err := os.Stat(h.m.log); err == nil {
		h.dumpFrom = st.Size()
	}
	if h.m.cmd.Process.Signal(syscall.SIGQUIT) != nil {
		return nil
	}
	return h.m.exited
}

// saveDump copies what the daemon printed since quitDaemon into its own
// file.
func (h *hungPass) saveDump() (string, error) {
	log, err := os.Open(h.m.log)
	if err != nil {
		return "", err
	}
	defer log.Close()
	out, err := os.Create(h.dump)
	if err != nil {
		return "", err
	}
	n, err := io.Copy(out, io.NewSectionReader(log, h.dumpFrom, 1<<62))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n == 0 {
		err = fmt.Errorf("the daemon printed nothing (see %s)", h.m.log)
	}
	return h.dump, err
}

func (h *hungPass) stopMount() []string {
	if h.m == nil {
		return nil
	}
	return h.m.stop()
}

// counters are the cumulative CPU seconds of the daemon, MinIO and
// Toxiproxy, and the bytes MinIO has written to its sockets.
type counters struct {
	daemon, store, proxy float64
	sent                 int64
}

func (d *driver) counters(daemon int) counters {
	c := counters{store: procCPU(d.minio.pid()), sent: procWchar(d.minio.pid())}
	if daemon > 0 {
		c.daemon = procCPU(daemon)
	}
	if d.proxy != nil {
		c.proxy = procCPU(d.proxy.pid())
	}
	return c
}

// procCPU is a process's user+system CPU seconds (/proc/PID/stat), 0 when
// it is gone.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which may hold spaces: state is the first.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

// procWchar is what a process has passed to write(2) and its kin, sockets
// included (/proc/PID/io).
func procWchar(pid int) int64 { return procField(fmt.Sprintf("/proc/%d/io", pid), "wchar:") }

// peakRSS is a process's VmHWM in bytes.
func peakRSS(pid int) int64 { return procField(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:") << 10 }

func procField(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// shardfsCounters reads a mount's counters from MNT/.shardfs/stats,
// each summed over its labels; none when the file cannot be read. It
// reads on a goroutine of its own and gives up after grace (false): a
// stuck daemon must not hold the driver, and its unmount frees the read.
func shardfsCounters(dir string) (map[string]int64, bool) {
	read := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(filepath.Join(dir, ".shardfs", "stats"))
		read <- b
	}()
	var b []byte
	select {
	case b = <-read:
	case <-time.After(grace):
		return nil, false
	}
	out := map[string]int64{}
	var samples []metrics.Sample
	if json.Unmarshal(b, &samples) != nil {
		return out, true
	}
	for _, s := range samples {
		// A family's total under its name, and each labelled series
		// under name{label="value",...} as well.
		out[s.Name] += int64(s.Value)
		if len(s.Labels) > 0 {
			var ls []string
			for k, v := range s.Labels {
				ls = append(ls, fmt.Sprintf("%s=%q", k, v))
			}
			slices.Sort(ls)
			out[s.Name+"{"+strings.Join(ls, ",")+"}"] = int64(s.Value)
		}
	}
	return out, true
}

func loadAvg() [3]float64 {
	var l [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		for i := range l {
			l[i], _ = strconv.ParseFloat(f[i], 64)
		}
	}
	return l
}

// dropCaches writes dirty pages out and drops the page cache, so the next
// read comes from where the data lives.
func dropCaches() error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("dropping the page cache (run as root): %w", err)
	}
	return nil
}

func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func thisMachine() Machine {
	m := Machine{CPUs: countCPUs()}
	m.Host, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	m.MemBytes = procField("/proc/meminfo", "MemTotal:") << 10
	return m
}

func countCPUs() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0
	}
	return set.Count()
}

// lock takes the box-wide benchmark lock, saying so while it waits.
func lock(path string, log io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		fmt.Fprintf(log, "waiting for %s: another benchmark holds it\n", path)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
