package cachedir

import (
	"encoding/json"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
)

// Owner is the record a mount writes into the cache dir it owns, so that
// `shardfs warm` can hand its work to that mount instead of failing on
// the dir's lock.
type Owner struct {
	Source     string `json:"source"`
	MountPoint string `json:"mountpoint"`
	PID        int    `json:"pid"`
}

// OwnerName is the owner record's file name in a cache dir.
const OwnerName = "owner.json"

// WriteOwner records o as dir's owner; remove takes the record away.
func WriteOwner(dir string, o Owner) (remove func(), err error) {
	path := filepath.Join(dir, OwnerName)
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

// ReadOwner returns the live mount that owns dir, if any: false when dir
// has no readable record or the process it names is not running. Callers
// vet dir first (CheckDir): only a dir of the user's own is believed.
func ReadOwner(dir string) (Owner, bool) {
	var o Owner
	raw, err := os.ReadFile(filepath.Join(dir, OwnerName))
	if err != nil || json.Unmarshal(raw, &o) != nil || o.PID <= 0 {
		return o, false
	}
	return o, unix.Kill(o.PID, 0) == nil
}
