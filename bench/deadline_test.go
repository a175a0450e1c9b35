package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// stagedPass is a pass past its deadline as a test stages it: channels
// stand for the readers and the daemon, and each step of the teardown
// does what the case says to them. It notes every step with the fake
// time since the pass started.
type stagedPass struct {
	start   time.Time
	steps   []string
	readers chan struct{}
	daemon  chan struct{}
	shardfs bool // has a goroutine dump to give
	mounted bool
	busy    bool // fusermount3 -u fails: a reader holds a file open
	// What ends the readers and the daemon: the first of these steps
	// to run whose name is listed.
	readersEndOn, daemonEndsOn []string
	abortFails                 bool
}

func (p *stagedPass) step(name string) {
	p.steps = append(p.steps, fmt.Sprintf("%s@%s", name, time.Since(p.start)))
	if slices.Contains(p.readersEndOn, name) {
		closeOnce(p.readers)
	}
	if slices.Contains(p.daemonEndsOn, name) {
		closeOnce(p.daemon)
		// A daemon gone takes its connection along: no request of the
		// readers is left to wait on.
		closeOnce(p.readers)
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (p *stagedPass) killReaders()                   { p.step("kill readers") }
func (p *stagedPass) readersExited() <-chan struct{} { return p.readers }

func (p *stagedPass) quitDaemon() <-chan struct{} {
	if !p.shardfs {
		return nil
	}
	p.step("SIGQUIT")
	return p.daemon
}

func (p *stagedPass) saveDump() (string, error) {
	p.step("save dump")
	return "logs/dump.goroutines", nil
}

func (p *stagedPass) stopMount() []string {
	if !p.mounted {
		return nil
	}
	return stopMount(p)
}

func (p *stagedPass) unmount(lazy bool) error {
	if lazy {
		p.step("fusermount3 -uz")
		return nil
	}
	p.step("fusermount3 -u")
	if p.busy {
		return errors.New("fusermount3 -u: Device or resource busy")
	}
	closeOnce(p.daemon) // an unmounted daemon that is not stuck exits
	return nil
}

func (p *stagedPass) daemonExited() <-chan struct{} { return p.daemon }
func (p *stagedPass) killDaemon()                   { p.step("kill daemon") }

func (p *stagedPass) abort() (string, error) {
	p.step("abort")
	if p.abortFails {
		return "", errors.New("permission denied")
	}
	return "/sys/fs/fuse/connections/52/abort", nil
}

// A pass that never ends is ended at its deadline, and each kind of hang
// is undone by the step that undoes it, no later: a stuck shardfs daemon
// by its goroutine dump, a stuck peer by killing it or, when it cannot
// die, by aborting its connection.
func TestAwaitEndsAPassThatNeverEnds(t *testing.T) {
	const limit = 660 * time.Second
	for _, c := range []struct {
		name         string
		pass         stagedPass
		wantTeardown []string
		wantSteps    []string
	}{{
		name:         "a command without a mount, whose readers die when killed",
		pass:         stagedPass{readersEndOn: []string{"kill readers"}},
		wantTeardown: []string{"readers killed"},
		wantSteps:    []string{"kill readers@11m0s"},
	}, {
		// The readers wait on a READ the daemon took and never answers:
		// killing them does nothing until the daemon goes.
		name:         "shardfs daemon that never answers a read",
		pass:         stagedPass{shardfs: true, mounted: true, daemonEndsOn: []string{"SIGQUIT"}},
		wantTeardown: []string{"readers killed", "daemon's goroutines in logs/dump.goroutines", "unmounted"},
		wantSteps:    []string{"kill readers@11m0s", "SIGQUIT@11m10s", "save dump@11m10s", "fusermount3 -u@11m10s"},
	}, {
		name:         "a peer's daemon stuck where SIGKILL cannot reach it",
		pass:         stagedPass{mounted: true, busy: true, daemonEndsOn: []string{"abort"}},
		wantTeardown: []string{"readers killed", "unmounted lazily", "daemon killed", "connection aborted (/sys/fs/fuse/connections/52/abort)"},
		wantSteps: []string{"kill readers@11m0s", "fusermount3 -u@11m10s", "fusermount3 -uz@11m10s",
			"kill daemon@11m40s", "abort@11m50s"},
	}, {
		name:         "a peer's daemon that dies when killed",
		pass:         stagedPass{mounted: true, busy: true, daemonEndsOn: []string{"kill daemon"}},
		wantTeardown: []string{"readers killed", "unmounted lazily", "daemon killed"},
		wantSteps:    []string{"kill readers@11m0s", "fusermount3 -u@11m10s", "fusermount3 -uz@11m10s", "kill daemon@11m40s"},
	}, {
		name: "nothing ends it",
		pass: stagedPass{mounted: true, busy: true, abortFails: true},
		wantTeardown: []string{"readers killed", "unmounted lazily", "daemon killed", "connection not aborted: permission denied",
			"daemon still running", "readers still running"},
		wantSteps: []string{"kill readers@11m0s", "fusermount3 -u@11m10s", "fusermount3 -uz@11m10s",
			"kill daemon@11m40s", "abort@11m50s"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := c.pass
				p.start, p.readers, p.daemon = time.Now(), make(chan struct{}), make(chan struct{})
				teardown, err := await(t.Context(), &p, limit)
				if err == nil || err.Error() != "timeout after 660s" {
					t.Errorf("error %v, want timeout after 660s", err)
				}
				if !slices.Equal(teardown, c.wantTeardown) {
					t.Errorf("teardown:\n%q\nwant:\n%q", teardown, c.wantTeardown)
				}
				if !slices.Equal(p.steps, c.wantSteps) {
					t.Errorf("steps:\n%q\nwant:\n%q", p.steps, c.wantSteps)
				}
			})
		})
	}
}

// A pass that ends in time is left alone; one ^C'd has its readers
// killed and nothing else.
func TestAwaitLeavesAPassThatEndsAndKillsOneCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stagedPass{start: time.Now(), readers: make(chan struct{}), daemon: make(chan struct{}), shardfs: true, mounted: true}
		go func() {
			time.Sleep(time.Minute)
			close(p.readers)
		}()
		teardown, err := await(t.Context(), p, 2*time.Minute)
		if err != nil || teardown != nil || len(p.steps) != 0 {
			t.Errorf("a pass that ended in time: %v, teardown %q, steps %q", err, teardown, p.steps)
		}

		p = &stagedPass{start: time.Now(), readers: make(chan struct{}), daemon: make(chan struct{}), shardfs: true, mounted: true,
			readersEndOn: []string{"kill readers"}}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(time.Minute)
			cancel()
		}()
		teardown, err = await(ctx, p, 2*time.Minute)
		if !errors.Is(err, context.Canceled) || teardown != nil || !slices.Equal(p.steps, []string{"kill readers@1m0s"}) {
			t.Errorf("a cancelled pass: %v, teardown %q, steps %q", err, teardown, p.steps)
		}
	})
}

// Killing the readers kills what they started: a shell's child that holds
// the pipe outlives a kill of the shell alone, so the pipe's end is seen
// only once the whole group is gone.
func TestReadersKillTheirWholeGroup(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command("sh", "-c", "sleep 1000 & echo started; wait")
	cmd.Stdout = pw
	p, err := startReaders(cmd)
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(pr).ReadString('\n'); line != "started\n" {
		t.Fatalf("the shell said %q, %v", line, err)
	}
	p.kill()
	<-p.exited()
	rest := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(pr)
		rest <- err
	}()
	select {
	case err := <-rest:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the shell's child still holds its output a minute after the kill")
	}
	if _, err := p.result(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("a killed pass exited with %v, want killed", err)
	}
}

// TestDaemonStandIn is a Go daemon stuck for good when run by
// TestHungPassKeepsTheDaemonsGoroutineDump, and nothing otherwise.
func TestDaemonStandIn(t *testing.T) {
	if os.Getenv("BENCH_DAEMON_STAND_IN") == "" {
		return
	}
	fmt.Println("ready")
	io.ReadAll(os.Stdin) // never ends: the test holds the pipe open
}

// A shardfs daemon asked for its goroutines prints them and exits, and
// the dump is kept apart from what its log held before.
func TestHungPassKeepsTheDaemonsGoroutineDump(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "shardfs.log")
	if err := os.WriteFile(logPath, []byte("an earlier run's lines\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDaemonStandIn$")
	cmd.Env = append(os.Environ(), "BENCH_DAEMON_STAND_IN=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("the stand-in said %q, %v", line, err)
	}
	m := &mount{cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		close(m.exited)
	}()
	h := &hungPass{m: m, shardfs: true, dump: filepath.Join(dir, "seq.shardfs.round1.pass1.goroutines")}
	exited := h.quitDaemon()
	if exited == nil {
		cmd.Process.Kill()
		t.Fatal("no SIGQUIT for a shardfs daemon")
	}
	if !within(exited, time.Minute) {
		cmd.Process.Kill()
		t.Fatal("the daemon did not exit a minute after SIGQUIT")
	}
	where, err := h.saveDump()
	if err != nil || where != h.dump {
		t.Fatalf("dump kept in %q, %v", where, err)
	}
	dump := readFile(t, where)
	if !strings.HasPrefix(dump, "SIGQUIT: quit") || !strings.Contains(dump, "goroutine ") || !strings.Contains(dump, "TestDaemonStandIn") {
		t.Errorf("the dump is not the daemon's goroutines:\n%s", dump)
	}
}

// The connection to abort is named by the mount's device, read from
// mountinfo, the mount on top where two share the mountpoint.
func TestMountConnReadsTheMountsDevice(t *testing.T) {
	const info = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
97 22 0:52 / /work/out/mnt rw,nosuid,nodev,relatime shared:50 - fuse.shardfs shardfs rw,user_id=0,group_id=0
98 22 0:300 / /work/out/mnt rw,nosuid,nodev,relatime shared:51 - fuse.rclone :s3:bench rw,user_id=0,group_id=0
99 22 0:53 / /work/my\040mnt rw,relatime shared:52 - fuse.s3fs s3fs rw,user_id=0,group_id=0
`
	for _, c := range []struct {
		dir  string
		want uint64
	}{
		{"/work/out/mnt", 300}, // the mount on top
		{"/work/my mnt", 53},
		{"/", 8<<20 | 1},
		{"/work/other", 0},
	} {
		if got := mountConn(info, c.dir); got != c.want {
			t.Errorf("%s: connection %d, want %d", c.dir, got, c.want)
		}
	}
}
