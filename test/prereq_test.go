//go:build e2e

package test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sysPython is Debian's interpreter, the one python3-torch installs into.
const sysPython = "/usr/bin/python3"

// checkPrerequisites reports every missing piece at once, with the fix.
func checkPrerequisites(root string) error {
	var missing []string
	if st, err := os.Stat("/dev/fuse"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		missing = append(missing, "/dev/fuse (a container needs --device /dev/fuse --cap-add SYS_ADMIN)")
	}
	for _, tool := range []string{"fusermount3", "rclone", "find", "tar", "du", "stat", "ls", "dd", "cat"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (run scripts/install-deps.sh)")
		}
	}
	if _, err := exec.LookPath("go"); err != nil {
		missing = append(missing, "go")
	}
	for _, tool := range []string{"minio", "toxiproxy-server", "csi-sanity"} {
		bin := filepath.Join(root, ".tools", "bin", tool)
		if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, bin+" (run scripts/install-deps.sh)")
		}
	}
	if out, err := exec.Command(sysPython, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		missing = append(missing, fmt.Sprintf("python3-torch and python3-numpy for %s (run scripts/install-deps.sh): %s",
			sysPython, strings.TrimSpace(lastLine(string(out)))))
	}
	if out, err := pythonCmdAt(root, "-c", "import shardfs").CombinedOutput(); err != nil {
		missing = append(missing, fmt.Sprintf("the shardfs Python package (pip install --no-build-isolation ./python, or SHARDFS_PYTHON unset): %s",
			strings.TrimSpace(lastLine(string(out)))))
	}
	if len(missing) > 0 {
		return errors.New("missing prerequisites:\n  " + strings.Join(missing, "\n  "))
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
