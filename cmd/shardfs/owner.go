package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"

	"github.com/shardfs/shardfs/atomicfile"
)

// cacheOwner is written into a cache dir by the mount that owns it, so
// that `shardfs warm` can hand its work to that mount instead of failing
// on the dir's lock.
type cacheOwner struct {
	Source     string `json:"source"`
	MountPoint string `json:"mountpoint"`
	PID        int    `json:"pid"`
}

const ownerFile = "owner.json"

func writeCacheOwner(dir string, o cacheOwner) (remove func(), err error) {
	path := filepath.Join(dir, ownerFile)
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	// Replaced whole, never written through a link planted at path.
	// Atomic, not durable: after a power loss the mount it names is gone.
	if err := atomicfile.WriteFile(path, atomicfile.Atomic, raw); err != nil {
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// readCacheOwner returns the live mount that owns dir, if any.
func readCacheOwner(dir string) (cacheOwner, bool) {
	var o cacheOwner
	raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil || json.Unmarshal(raw, &o) != nil || o.PID <= 0 {
		return o, false
	}
	return o, syscall.Kill(o.PID, 0) == nil
}
