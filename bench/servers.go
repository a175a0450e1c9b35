package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// server is a process the driver started and must stop: MinIO or
// Toxiproxy.
type server struct {
	name   string
	cmd    *exec.Cmd
	url    string
	dir    string // removed when it stops; "" for none
	exited chan struct{}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop ends the server (killed after 20 s) and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// start runs cmd as a server whose log goes to OUT/logs/NAME.log, and waits
// until ready answers true, failing when the process exits first or after
// a minute.
func start(ctx context.Context, o Options, name string, cmd *exec.Cmd, ready func() bool) (*server, error) {
	logf, err := os.Create(filepath.Join(o.Out, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C reaches the driver, which stops it
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(s.exited) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !ready() {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited while starting (see %s)", name, logf.Name())
		case <-deadline:
			s.stop()
			return nil, fmt.Errorf("%s not ready after a minute (see %s)", name, logf.Name())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	return s, nil
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startMinIO starts a throwaway MinIO (.tools/bin/minio) on a free port,
// its data in a fresh directory under TMPDIR.
func startMinIO(ctx context.Context, o Options) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	console, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shardfs-bench-minio.")
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(filepath.Join(o.Root, ".tools", "bin", "minio"), "server", "--quiet",
		"--address", "127.0.0.1:"+strconv.Itoa(port), "--console-address", "127.0.0.1:"+strconv.Itoa(console),
		"--certs-dir", filepath.Join(dir, ".certs"), filepath.Join(dir, "drive"))
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	s, err := start(ctx, o, "minio", cmd, func() bool { return httpOK(url + "/minio/health/ready") })
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.url, s.dir = url, dir
	return s, nil
}

// startToxiproxy puts a Toxiproxy between the clients and upstream, with
// r's latency on every response and its rate cap on every connection, and
// returns it with the endpoint clients use.
func startToxiproxy(ctx context.Context, o Options, upstream string, r Remote) (*server, string, error) {
	api, err := freePort()
	if err != nil {
		return nil, "", err
	}
	listen, err := freePort()
	if err != nil {
		return nil, "", err
	}
	apiURL := "http://127.0.0.1:" + strconv.Itoa(api)
	cmd := exec.Command(filepath.Join(o.Root, ".tools", "bin", "toxiproxy-server"), "-host", "127.0.0.1", "-port", strconv.Itoa(api))
	s, err := start(ctx, o, "toxiproxy", cmd, func() bool { return httpOK(apiURL + "/version") })
	if err != nil {
		return nil, "", err
	}
	upHost := upstream[len("http://"):]
	for _, req := range []struct{ path, body string }{
		{"/proxies", fmt.Sprintf(`{"name":"s3","listen":"127.0.0.1:%d","upstream":%q}`, listen, upHost)},
		{"/proxies/s3/toxics", fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, r.LatencyMS)},
		{"/proxies/s3/toxics", fmt.Sprintf(`{"name":"bandwidth","type":"bandwidth","stream":"downstream","attributes":{"rate":%d}}`, r.RateKBps)},
	} {
		resp, err := http.Post(apiURL+req.path, "application/json", bytes.NewReader([]byte(req.body)))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		if err != nil {
			s.stop()
			return nil, "", fmt.Errorf("configuring toxiproxy (%s): %w", req.path, err)
		}
	}
	return s, "http://127.0.0.1:" + strconv.Itoa(listen), nil
}

// mount is one mounted system: its daemon in the foreground as the
// driver's child.
type mount struct {
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     string       // the daemon's stdout and stderr
	conn    uint64       // the FUSE connection's number under /sys/fs/fuse/connections; 0 while not known
	seconds float64      // from the mount command to the first listing
	last    passCounters // the daemon's counters at the last pass's end
	scratch string       // a cold system's cache dir, removed once unmounted: its ring is preallocated
	stopped bool         // stop has run
}

// mount mounts r's system at the driver's mountpoint (a shardfs system
// with bin) and waits until the data set lists.
func (d *driver) mount(ctx context.Context, r Run, bin string) (*mount, error) {
	y := r.System
	source := bucket + "/" + d.prefix(r.Dataset)
	endpoint := d.endpoint(r.Store)
	var argv []string
	var scratch string
	switch y.Kind {
	case "shardfs":
		argv = []string{bin, "mount", "s3://" + source, d.mnt, "--foreground", "--log-level", "warn"}
		if y.Cache {
			cache := filepath.Join(d.o.Out, "cache", y.Name+"-"+d.prefix(r.Dataset))
			if y.Warm {
				if err := d.warm(ctx, y, r.Dataset, cache); err != nil {
					return nil, err
				}
			} else if err := os.RemoveAll(cache); err != nil {
				return nil, err
			} else {
				scratch = cache
			}
			argv = append(argv, "--cache-dir", cache, "--cache-size", cacheSize(y, r.Dataset))
		}
	case "s3fs":
		passwd := filepath.Join(d.o.Out, "s3fs.passwd")
		if err := os.WriteFile(passwd, []byte(accessKey+":"+secretKey+"\n"), 0o600); err != nil {
			return nil, err
		}
		argv = []string{"s3fs", bucket + ":/" + d.prefix(r.Dataset), d.mnt, "-f",
			"-o", "ro,url=" + endpoint + ",use_path_request_style,passwd_file=" + passwd}
	case "rclone":
		argv = []string{"rclone", "mount", ":s3:" + source, d.mnt, "--s3-provider", "Minio", "--s3-endpoint", endpoint,
			"--s3-region", region, "--s3-access-key-id", accessKey, "--s3-secret-access-key", secretKey,
			"--read-only", "--vfs-cache-mode", "off"}
	}
	argv = append(argv, y.Flags...)
	logf, err := os.OpenFile(filepath.Join(d.o.Out, "logs", y.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(d.storeEnv(endpoint), "RCLONE_CONFIG=/dev/null")
	if y.Kind == "shardfs" && d.o.Profile {
		dir := filepath.Join(d.o.Out, "profiles")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			logf.Close()
			return nil, err
		}
		name := filepath.Join(dir, fmt.Sprintf("%s.%s.%s.x%g.round%d", r.Workload.Name, y.Name, r.Store, r.X, r.Round))
		cmd.Env = append(cmd.Env, "SHARDFS_CPUPROFILE="+name+".cpu.pprof", "SHARDFS_MEMPROFILE="+name+".mem.pprof")
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	m := &mount{dir: d.mnt, cmd: cmd, exited: make(chan struct{}), log: logf.Name(), scratch: scratch}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", y.Name, err)
	}
	go func() { cmd.Wait(); logf.Close(); close(m.exited) }()
	// The listing is probed on a goroutine of its own: a daemon stuck
	// before it answers must not hold the driver past the deadline.
	probe := func() <-chan bool {
		ok := make(chan bool, 1)
		go func() { ok <- listed(d.mnt) }()
		return ok
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for listing := probe(); ; {
		select {
		case ok := <-listing:
			if ok {
				m.seconds = time.Since(begin).Seconds()
				return m, nil
			}
			listing = nil
		case <-tick.C:
			if listing == nil {
				listing = probe()
			}
		case <-m.exited:
			return nil, fmt.Errorf("%s exited while mounting (see %s)", y.Name, logf.Name())
		case <-deadline:
			m.stop()
			return nil, fmt.Errorf("%s not mounted after a minute (see %s)", y.Name, logf.Name())
		case <-ctx.Done():
			m.stop()
			return nil, ctx.Err()
		}
	}
}

// fuseConn is the number of the FUSE connection mounted at dir, 0 when
// nothing is: the kernel's device number of the mount (major << 20 |
// minor), which names its directory under /sys/fs/fuse/connections. It
// is read from /proc/self/mountinfo, which asks the daemon nothing.
func fuseConn(dir string) uint64 {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0
	}
	return mountConn(string(b), dir)
}

// mountConn finds the device of the mount at dir in mountinfo's text:
// the last line whose mount point (the fifth field, with \ooo escapes)
// is dir, its third field MAJOR:MINOR.
func mountConn(mountinfo, dir string) uint64 {
	var conn uint64
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || unescapeMountinfo(f[4]) != dir {
			continue
		}
		major, minor, ok := strings.Cut(f[2], ":")
		hi, err1 := strconv.ParseUint(major, 10, 32)
		lo, err2 := strconv.ParseUint(minor, 10, 32)
		if ok && err1 == nil && err2 == nil {
			conn = hi<<20 | lo
		}
	}
	return conn
}

// unescapeMountinfo undoes mountinfo's octal escapes of space, tab,
// newline and backslash.
func unescapeMountinfo(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// listed reports whether dir is a mount point that lists something.
func listed(dir string) bool {
	var st, parent syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || syscall.Stat(filepath.Dir(dir), &parent) != nil || st.Dev == parent.Dev {
		return false
	}
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// stop unmounts and sees the daemon gone (stopMount), once; it lists
// what it did.
func (m *mount) stop() []string {
	if m.stopped {
		return nil
	}
	m.stopped = true
	m.conn = fuseConn(m.dir) // while it is still mounted: abort needs it
	did := stopMount(m)
	if m.scratch != "" {
		_ = os.RemoveAll(m.scratch)
	}
	return did
}

func (m *mount) unmount(lazy bool) error {
	flag := "-u"
	if lazy {
		flag = "-uz"
	}
	if out, err := exec.Command("fusermount3", flag, m.dir).CombinedOutput(); err != nil {
		return fmt.Errorf("fusermount3 %s: %v: %s", flag, err, bytes.TrimSpace(out))
	}
	return nil
}

func (m *mount) daemonExited() <-chan struct{} { return m.exited }

func (m *mount) killDaemon() { _ = m.cmd.Process.Kill() }

// fuseConnections is where the kernel's fusectl file system lists FUSE
// connections; not every box mounts it.
const fuseConnections = "/sys/fs/fuse/connections"

func (m *mount) abort() (string, error) {
	if m.conn == 0 {
		return "", fmt.Errorf("the mount's connection is not known")
	}
	dir := filepath.Join(fuseConnections, strconv.FormatUint(m.conn, 10))
	if _, err := os.Stat(dir); err != nil {
		_ = unix.Mount("fusectl", fuseConnections, "fusectl", 0, "")
	}
	file := filepath.Join(dir, "abort")
	if err := os.WriteFile(file, []byte("1"), 0); err != nil {
		return "", err
	}
	return file, nil
}

func cacheSize(y *System, ds *Dataset) string {
	if y.CacheSize != "" {
		return y.CacheSize
	}
	return strconv.FormatInt(2*ds.Bytes()+(1<<30), 10)
}

// warm fills a warm system's cache dir with `shardfs warm` over loopback,
// once per data set.
func (d *driver) warm(ctx context.Context, y *System, ds *Dataset, cache string) error {
	if d.warmed[cache] {
		return nil
	}
	os.RemoveAll(cache)
	cmd := exec.CommandContext(ctx, d.o.Shardfs, "warm", "s3://"+bucket+"/"+d.prefix(ds), "--cache-dir", cache,
		"--cache-size", cacheSize(y, ds))
	cmd.Env = d.storeEnv(d.minio.url)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("shardfs warm: %v\n%s", err, out)
	}
	d.warmed[cache] = true
	return nil
}

// passCounters are the daemon's counters a row records the change of.
type passCounters struct {
	fetched int64 // shardfs_store_bytes_total
	served  int64 // shardfs_read_bytes_total
	unread  int64 // shardfs_prefetch_unread_bytes_total
	evicted int64 // shardfs_prefetch_evicted_unread_bytes_total
}
