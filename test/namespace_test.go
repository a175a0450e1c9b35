//go:build e2e

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopWhileAnotherNamespaceHoldsTheMount: a process that unshared its
// mount namespace while the mount existed (a container, `ip netns exec`)
// keeps a copy of it, and with it the kernel's connection, after the daemon
// unmounts its own. SIGTERM must still end the daemon, with a warning that
// says why it did not wait.
func TestStopWhileAnotherNamespaceHoldsTheMount(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.tar"), []byte("shard bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mountShardfs(t, src)
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "300")
	if err := holder.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	self, _ := os.Readlink("/proc/self/ns/mnt")
	for deadline := time.Now().Add(10 * time.Second); ; {
		// unshare has made its namespace once it has become sleep.
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(holder.Process.Pid) + "/ns/mnt")
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(holder.Process.Pid) + "/comm")
		if ns != "" && ns != self && strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare made no mount namespace in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(unmountTimeout):
		t.Fatalf("shardfs still running %v after SIGTERM while another namespace holds the mount\noutput:\n%s", unmountTimeout, m.output.String())
	}
	if m.err != nil {
		t.Fatalf("shardfs exited with %v\noutput:\n%s", m.err, m.output.String())
	}
	if !strings.Contains(m.output.String(), "another mount namespace still holds the mount") {
		t.Fatalf("no warning about the other namespace\noutput:\n%s", m.output.String())
	}
	if err := waitMountState(m.dir, false, nil, unmountTimeout); err != nil {
		t.Fatalf("mount still listed here: %v", err)
	}
}
