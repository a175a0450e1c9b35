//go:build e2e

package test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemoryFitsTheCgroupLimit: a daemon started with default budgets in a
// memory cgroup with a 768 MiB limit sizes its read-ahead budget to the
// limit and serves a 2 GiB data set to 8 readers, cold and then in a
// shuffled order, byte for byte; the kernel never OOM-kills in the group,
// the daemon's peak RSS stays under the limit and it exits 0 on SIGTERM.
// At a 256 MiB limit, --memory-target 1GiB for the same data set is
// refused in one line naming the cgroup, with nothing mounted.
func TestMemoryFitsTheCgroupLimit(t *testing.T) {
	t.Parallel()
	const (
		limit   = 768 << 20
		readers = 8
	)
	source, objs := uploadGenerated(t, "memlimit", 64, 32<<20)
	cg := newMemoryCgroup(t, limit)

	dir := t.TempDir()
	argv := append([]string{"mount", "--foreground", "--log-level", "debug"}, e2e.endpoint()...)
	m := startMountIn(t, cg, dir, append(argv, source, dir), e2e.env())

	// The daemon tells the Go runtime its read-ahead budget plus room
	// first, with the RAM tier still empty: under the limit's target only
	// if the budget was sized to the limit.
	if err := m.waitLogged(`msg="memory limit"`, mountTimeout); err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`msg="memory limit" bytes=(\d+)`).FindStringSubmatch(m.output.String())
	if match == nil {
		t.Fatalf("no memory limit logged:\n%s", m.output.String())
	}
	if got, _ := strconv.ParseInt(match[1], 10, 64); got > limit*3/4 {
		t.Fatalf("read-ahead budget and room %d bytes, over 75%% of the %d-byte cgroup limit: the defaults ignored it", got, limit)
	}

	// Cold: reader r reads files r, r+readers, ... in key order.
	// Shuffled: the readers take whole files from one shuffled order.
	cold := make([][]object, readers)
	for i, o := range objs {
		cold[i%readers] = append(cold[i%readers], o)
	}
	readAll(readers, func(r int) { checkShards(t, dir, cold[r]) })
	if t.Failed() {
		t.FailNow()
	}
	shuffled := make(chan object, len(objs))
	for _, i := range rand.New(rand.NewPCG(38, 768)).Perm(len(objs)) {
		shuffled <- objs[i]
	}
	close(shuffled)
	readAll(readers, func(int) {
		for o := range shuffled {
			checkShards(t, dir, []object{o})
		}
	})

	select {
	case <-m.exited:
		t.Fatalf("the daemon died while serving (%v): OOM-killed in its cgroup?\noutput:\n%s", m.err, m.output.String())
	default:
	}
	if n := oomKills(t, cg); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes in %s", n, cg.dir)
	}
	peak := peakRSS(t, m.cmd.Process.Pid)
	t.Logf("daemon peak RSS %d MiB under a %d MiB cgroup limit", peak>>20, limit>>20)
	if peak >= limit {
		t.Errorf("daemon peak RSS %d bytes, not under the %d-byte cgroup limit", peak, limit)
	}
	m.stop(t) // exit status 0 after SIGTERM: not OOM-killed

	small := newMemoryCgroup(t, 256<<20)
	over := t.TempDir()
	r := runIn(t, small, e2e.env(), append(append([]string{"mount", "--memory-target", "1GiB"}, e2e.endpoint()...), source, over)...)
	want := fmt.Sprintf("--memory-target 1.0 GiB is over the 256 MiB memory limit of cgroup %s", small.dir)
	if r.err != nil || r.code == 0 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("--memory-target over the limit: exit %d, %v, stderr %q; want a non-zero exit and one line with %q", r.code, r.err, r.stderr, want)
	}
	if isMounted(over) {
		t.Errorf("%s mounted after a refused --memory-target", over)
		exec.Command("fusermount3", "-u", "-z", over).Run()
	}
}

// readAll runs read(r) for every r in [0, readers) at once and waits for
// all of them.
func readAll(readers int, read func(r int)) {
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read(r)
		}()
	}
	wg.Wait()
}

// uploadGenerated makes prefix of the test bucket hold files objects of
// size bytes each, and nothing else, and returns its s3:// source and the
// objects. The bytes are pseudo-random (ChaCha8 seeded by the file's
// index), so no two blocks are alike, and each file is hashed as it is
// written; the local copy goes once MinIO has it, the prefix when the
// test ends.
func uploadGenerated(t *testing.T, prefix string, files int, size int64) (string, []object) {
	t.Helper()
	dir := t.TempDir()
	objs := make([]object, files)
	buf := make([]byte, 1<<20)
	for i := range objs {
		key := fmt.Sprintf("part-%04d.bin", i)
		f, err := os.Create(filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], uint64(i))
		gen, sum := rand.NewChaCha8(seed), sha256.New()
		for n := int64(0); n < size; n += int64(len(buf)) {
			chunk := buf[:min(int64(len(buf)), size-n)]
			gen.Read(chunk)
			sum.Write(chunk)
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		objs[i] = object{key: key, size: size, sha256: hex.EncodeToString(sum.Sum(nil))}
	}
	remote := ":s3:" + e2e.bucket + "/" + prefix
	// sync, not copy: what an earlier run of the test left under prefix
	// goes (go test -count runs a test again against the same MinIO).
	if err := e2e.rclone("sync", "--transfers", "4", dir, remote); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	t.Cleanup(func() {
		if err := e2e.rclone("purge", remote); err != nil {
			t.Errorf("removing the generated data set: %v", err)
		}
	})
	return "s3://" + e2e.bucket + "/" + prefix, objs
}

// oomKills is how many processes the kernel OOM-killed in cg: oom_kill
// of memory.oom_control (v1) or of memory.events (v2).
func oomKills(t *testing.T, cg memoryCgroup) int64 {
	t.Helper()
	for _, file := range []string{"memory.oom_control", "memory.events"} {
		data, err := os.ReadFile(filepath.Join(cg.dir, file))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %q", file, line)
				}
				return n
			}
		}
	}
	t.Fatalf("no oom_kill count in %s (memory.oom_control or memory.events)", cg.dir)
	return 0
}

// memoryCgroup is a memory cgroup a test made, with its limit.
type memoryCgroup struct {
	dir   string // as this process sees it
	procs string // the file a process writes its pid to, to join
}

var cgroupSeq atomic.Int64

// newMemoryCgroup makes a memory cgroup limited to limit bytes under the
// v1 memory controller's mount, else under the v2 mount (enabling the
// memory controller for its children), and removes it when the test ends,
// after the processes in it have gone. A test that needs one fails when
// neither can be made: a skip would hide that the check never ran.
func newMemoryCgroup(t *testing.T, limit int64) memoryCgroup {
	t.Helper()
	v1, v2 := cgroupMounts(t)
	name := fmt.Sprintf("shardfs-test-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	var cg memoryCgroup
	var limitFile string
	switch {
	case v1 != "":
		cg.dir, limitFile = filepath.Join(v1, name), "memory.limit_in_bytes"
	case v2 != "":
		// The root's children get the memory controller only when the
		// root enables it; writing what is already enabled is harmless.
		os.WriteFile(filepath.Join(v2, "cgroup.subtree_control"), []byte("+memory"), 0)
		cg.dir, limitFile = filepath.Join(v2, name), "memory.max"
	default:
		t.Fatal("no cgroup v1 memory controller and no cgroup v2 hierarchy mounted (see /proc/self/mountinfo): this test needs one it can write")
	}
	cg.procs = filepath.Join(cg.dir, "cgroup.procs")
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatalf("this test makes a memory cgroup and needs it writable (root): %v", err)
	}
	t.Cleanup(func() {
		// The kernel lets an emptied cgroup go a moment after its last process.
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := os.Remove(cg.dir)
			if err == nil || os.IsNotExist(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove cgroup %s: %v", cg.dir, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(cg.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatalf("set the limit of cgroup %s: %v", cg.dir, err)
	}
	return cg
}

// cgroupMounts finds the v1 memory controller's mount point and the v2
// hierarchy's ("" where there is none).
func cgroupMounts(t *testing.T) (v1, v2 string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup":
			for _, o := range strings.Split(tail[2], ",") {
				if o == "memory" && v1 == "" {
					v1 = fields[4]
				}
			}
		case "cgroup2":
			if v2 == "" {
				v2 = fields[4]
			}
		}
	}
	return v1, v2
}

// plainBinary is the shardfs binary without the race detector, built once
// where the suite's own has it (SHARDFS_TEST_RACE=1): the detector's shadow
// memory multiplies the daemon's RSS, and a daemon sized to a cgroup limit
// would be OOM-killed for memory a production build never holds.
var plainBinary = sync.OnceValues(func() (string, error) {
	if os.Getenv("SHARDFS_TEST_RACE") != "1" {
		return e2e.bin, nil
	}
	bin := filepath.Join(e2e.tmp, "shardfs-plain")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/shardfs")
	cmd.Dir = e2e.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/shardfs: %v\n%s", err, out)
	}
	return bin, nil
})

// inCgroup is shardfs argv run by a shell that first moves itself into cg
// and then becomes shardfs, so the daemon starts in cg with its own pid.
func inCgroup(t *testing.T, cg memoryCgroup, argv ...string) *exec.Cmd {
	t.Helper()
	bin, err := plainBinary()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command("sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cg.procs, bin}, argv...)...)
}

// startMountIn is startMount with the daemon in cg.
func startMountIn(t *testing.T, cg memoryCgroup, dir string, argv, env []string) *fgMount {
	t.Helper()
	m := &fgMount{dir: dir, output: &lockedBuffer{}, exited: make(chan struct{})}
	m.cmd = inCgroup(t, cg, argv...)
	m.cmd.Env = env
	m.cmd.Stdout, m.cmd.Stderr = m.output, m.output
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start shardfs %s in %s: %v", strings.Join(argv, " "), cg.dir, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-m.exited:
		default:
			m.stop(t)
		}
	})
	if err := waitMountState(dir, true, m.exited, mountTimeout); err != nil {
		t.Fatalf("shardfs %s: %v\noutput:\n%s", strings.Join(argv, " "), err, m.output.String())
	}
	if err := m.waitLogged("msg=mounted", mountTimeout); err != nil {
		t.Fatalf("shardfs %s: %v\noutput:\n%s", strings.Join(argv, " "), err, m.output.String())
	}
	return m
}

// runIn is runShardfs with the command in cg.
func runIn(t *testing.T, cg memoryCgroup, env []string, argv ...string) result {
	t.Helper()
	cmd := inCgroup(t, cg, argv...)
	cmd.Env = env
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), mountTimeout)
	defer cancel()
	if err := cmd.Start(); err != nil {
		return result{code: -1, err: err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return result{code: -1, stdout: stdout.String(), stderr: stderr.String(), err: ctx.Err()}
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		r.err = err
	}
	return r
}

// peakRSS is VmHWM of process pid, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
