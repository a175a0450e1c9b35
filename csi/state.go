package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/shardfs/shardfs/atomicfile"
)

// record is what the plugin keeps about one published volume, so that a
// restarted plugin can tell a repeated NodePublishVolume from a
// conflicting one. It holds no secret and no hash of one.
type record struct {
	VolumeID    string `json:"volume_id"`
	Target      string `json:"target"`
	Source      string `json:"source"`
	Fingerprint string `json:"fingerprint"` // volume ID and settings; see fingerprint
	CacheDir    string `json:"cache_dir"`
}

// shortHash names files after a string: 16 hex digits of its SHA-256.
func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// fingerprint identifies a volume and its settings: the same volume
// published again with other settings has another fingerprint.
func fingerprint(volumeID string, settings []string) string {
	parts := append([]string{volumeID}, settings...)
	sort.Strings(parts[1:])
	return shortHash(parts...)
}

func (n *Node) recordPath(target string) string {
	return filepath.Join(n.cfg.StateDir, shortHash(target)+".json")
}

// saveRecord replaces r's record atomically. Atomic, not durable: a power
// loss takes the node's mounts with it, and the record only names a mount.
func (n *Node) saveRecord(r record) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(n.recordPath(r.Target), atomicfile.Atomic, raw); err != nil {
		return fmt.Errorf("saving volume record: %w", err)
	}
	return nil
}

// loadRecords reads every record; unreadable ones are dropped.
func (n *Node) loadRecords() map[string]record {
	out := map[string]record{}
	files, _ := filepath.Glob(filepath.Join(n.cfg.StateDir, "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		var r record
		if err != nil || json.Unmarshal(raw, &r) != nil || r.Target == "" {
			n.cfg.Log.Warn("dropping unreadable volume record", "file", f)
			os.Remove(f)
			continue
		}
		out[r.Target] = r
	}
	return out
}

func (n *Node) removeRecord(target string) {
	if err := os.Remove(n.recordPath(target)); err != nil && !os.IsNotExist(err) {
		n.cfg.Log.Warn("removing volume record", "target", target, "err", err)
	}
}
