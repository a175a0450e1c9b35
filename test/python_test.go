//go:build e2e

package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shardfs/shardfs/gds"
)

// pythonCmd runs Python that imports the shardfs package. scripts/test.sh
// installs the package into a virtual environment made with Debian's
// interpreter (--system-site-packages, so torch and numpy come along) and
// names its python in SHARDFS_PYTHON: the tests then exercise the installed
// copy. Without it, Debian's interpreter reads the package from python/.
func pythonCmd(args ...string) *exec.Cmd {
	return pythonCmdAt(e2e.root, args...)
}

// pythonCmdAt is pythonCmd for the checkout at root.
func pythonCmdAt(root string, args ...string) *exec.Cmd {
	if py := os.Getenv("SHARDFS_PYTHON"); py != "" {
		cmd := exec.Command(py, args...)
		cmd.Env = os.Environ()
		return cmd
	}
	cmd := exec.Command(sysPython, args...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "python"))
	return cmd
}

// abiGolden is python/tests/abi_golden.json: the ABI values the Python
// client is checked against (python/tests/test_abi.py).
type abiGolden struct {
	ABIVersion int               `json:"abi_version"`
	Commands   map[string]string `json:"commands"`
	Flags      map[string]int    `json:"flags"`
	Sizes      map[string]int    `json:"sizes"`
}

// The golden values the Python client is held to are the daemon's: every
// command number, the flags and the sizes. A change on either side fails
// this test or the Python one.
func TestPythonABIGoldenIsTheDaemons(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(e2e.root, "python", "tests", "abi_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g abiGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("abi_golden.json: %v", err)
	}
	commands := map[string]uint32{
		"register": gds.CmdRegister, "unregister": gds.CmdUnregister, "read": gds.CmdRead, "lease": gds.CmdLease,
		"lease_drop": gds.CmdLeaseDrop, "submit": gds.CmdSubmit, "wait": gds.CmdWait, "whole_file": gds.CmdWholeFile,
	}
	if len(g.Commands) != len(commands) {
		t.Errorf("abi_golden.json names %d commands, the daemon has %d", len(g.Commands), len(commands))
	}
	for name, cmd := range commands {
		if want := fmt.Sprintf("%#x", cmd); g.Commands[name] != want {
			t.Errorf("abi_golden.json: %s = %q, the daemon's is %s", name, g.Commands[name], want)
		}
	}
	ints := map[string][2]int{
		"abi_version":               {g.ABIVersion, gds.ABIVersion},
		"flags.submit_wait":         {g.Flags["submit_wait"], gds.SubmitWait},
		"flags.lease_unless_in_ram": {g.Flags["lease_unless_in_ram"], gds.LeaseUnlessInRAM},
		"flags.lease_from_ram":      {g.Flags["lease_from_ram"], gds.LeaseFromRAM},
		"flags.entry_done":          {g.Flags["entry_done"], gds.EntryDone},
		"sizes.shm_name":            {g.Sizes["shm_name"], gds.ShmNameSize},
		"sizes.path":                {g.Sizes["path"], gds.PathSize},
		"sizes.max_lease_extents":   {g.Sizes["max_lease_extents"], gds.MaxLeaseExtents},
		"sizes.max_lease_paths":     {g.Sizes["max_lease_paths"], gds.MaxLeasePaths},
		"sizes.batch_entry":         {g.Sizes["batch_entry"], gds.BatchEntrySize},
	}
	for name, v := range ints {
		if v[0] != v[1] {
			t.Errorf("abi_golden.json: %s = %d, the daemon's is %d", name, v[0], v[1])
		}
	}
}
