package bench

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// grace is how long each step of ending a pass waits for what it asked:
// the readers to exit once killed, a daemon to print its goroutines and
// exit, or to exit once killed or cut off (exitGrace: once unmounted).
const grace = 10 * time.Second

// proc is a started workload process as measure and endHung see it;
// *readers is the driver's, the tests' act on gates.
type proc interface {
	exited() <-chan struct{}
	// kill ends the process and everything it started.
	kill()
	// result is the CPU seconds it and the children it waited for spent,
	// and how it exited; read once exited is closed.
	result() (cpu float64, err error)
}

// readers is one pass's workload process, the leader of a process group
// of its own that holds everything it starts (a DataLoader's workers,
// fio's jobs, a shell's commands), so that one signal ends them all.
type readers struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's; read once done is closed
}

// startReaders starts cmd in a process group of its own. A ^C reaches
// the driver alone, which then kills the group (await).
func startReaders(cmd *exec.Cmd) (proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A killed leader's children may hold its output pipes open for as
	// long as they are stuck in a read: Wait gives up on the pipes then.
	cmd.WaitDelay = grace
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &readers{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	return r, nil
}

func (r *readers) exited() <-chan struct{} { return r.done }

// kill sends SIGKILL to the readers' whole process group. A reader stuck
// in a FUSE request the daemon already took dies only once the request
// is answered or its connection goes.
func (r *readers) kill() { _ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) }

func (r *readers) result() (float64, error) {
	var cpu float64
	if r.cmd.ProcessState == nil {
		return cpu, r.err
	}
	if ru, ok := r.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return cpu, r.err
}

// hung is a pass that outlived its deadline, as endHung sees it: its
// readers, and what it can do to the system they read. The driver's is
// hungPass; the tests' act on gates.
type hung interface {
	killReaders()
	readersExited() <-chan struct{}
	// quitDaemon asks a shardfs daemon for its goroutines (SIGQUIT: the
	// Go runtime prints them to the daemon's log and exits) and returns
	// what closes once the daemon has exited; nil for a system without
	// such a daemon.
	quitDaemon() <-chan struct{}
	// saveDump keeps what the daemon printed since quitDaemon and says
	// where.
	saveDump() (string, error)
	// stopMount ends the mount the readers read (stopMount) and lists what
	// it did; nothing for a system without one.
	stopMount() []string
}

// fuseMount is what ending a mount takes. *mount is the driver's.
type fuseMount interface {
	// unmount runs fusermount3 -u, or -uz when lazy.
	unmount(lazy bool) error
	daemonExited() <-chan struct{}
	killDaemon()
	// abort writes to the mount's /sys/fs/fuse/connections/N/abort,
	// which fails every request in flight and every one to come; it says
	// which file it wrote.
	abort() (string, error)
}

// endHung ends a pass that outlived its deadline and lists what it did,
// in order: it kills the readers; for a shardfs daemon, keeps its
// goroutine dump (taking it ends the daemon); ends the mount
// (stopMount). It waits at most grace for each step.
func endHung(h hung) []string {
	h.killReaders()
	did := []string{"readers killed"}
	within(h.readersExited(), grace)
	if exited := h.quitDaemon(); exited != nil {
		within(exited, grace)
		if where, err := h.saveDump(); err != nil {
			did = append(did, "no goroutine dump: "+err.Error())
		} else {
			did = append(did, "daemon's goroutines in "+where)
		}
	}
	did = append(did, h.stopMount()...)
	if !within(h.readersExited(), grace) {
		did = append(did, "readers still running")
	}
	return did
}

// exitGrace is how long an unmounted daemon is given to exit before it
// is killed: a shardfs daemon writes its cache's state out first.
const exitGrace = 30 * time.Second

// stopMount unmounts m and sees its daemon gone: unmounted lazily when
// busy (a reader stuck in a request keeps its file open), the daemon
// killed when it has not exited, and as the last resort its connection
// aborted, which frees a reader stuck in a request no daemon will answer
// and a daemon stuck in one of its own. It lists what it did.
func stopMount(m fuseMount) []string {
	var did []string
	if err := m.unmount(false); err == nil {
		did = append(did, "unmounted")
	} else if err := m.unmount(true); err == nil {
		did = append(did, "unmounted lazily")
	} else {
		did = append(did, "not unmounted: "+err.Error())
	}
	if within(m.daemonExited(), exitGrace) {
		return did
	}
	m.killDaemon()
	did = append(did, "daemon killed")
	if within(m.daemonExited(), grace) {
		return did
	}
	if file, err := m.abort(); err != nil {
		did = append(did, "connection not aborted: "+err.Error())
	} else {
		did = append(did, "connection aborted ("+file+")")
	}
	if !within(m.daemonExited(), grace) {
		did = append(did, "daemon still running")
	}
	return did
}

// within reports whether done closes within d.
func within(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// errTimeout is the error of a pass that outlived limit: the reason its
// record carries.
func errTimeout(limit time.Duration) error {
	return fmt.Errorf("timeout after %.0fs", limit.Seconds())
}

// await waits for a pass's readers to exit, for its deadline or for ctx.
// Past the deadline it ends the pass with endHung and returns what that
// did and errTimeout; when ctx ends first it kills the readers and
// returns ctx's error.
func await(ctx context.Context, h hung, limit time.Duration) ([]string, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-h.readersExited():
		return nil, nil
	case <-ctx.Done():
		h.killReaders()
		within(h.readersExited(), grace)
		return nil, ctx.Err()
	case <-t.C:
		return endHung(h), errTimeout(limit)
	}
}
