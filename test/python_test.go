//go:build e2e

package test

import (
	"os"
	"os/exec"
	"path/filepath"
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
