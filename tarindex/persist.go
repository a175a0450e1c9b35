package tarindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/store"
)

// A persisted index is one file per shard under DIR/indexes, named by a
// hash of source and key: a header line naming source, key, ETag and size
// of the shard version, the member count, the body's length and its
// SHA-256, then the body, the JSON lines served. A new version of the
// shard overwrites its file. It is replaced whole (package atomicfile); a
// file cut short or changed on disk fails its checksum and
// is rebuilt, never served.

const persistVersion = 1

type persistHeader struct {
	Version int    `json:"shardfs_index"`
	Source  string `json:"source"`
	Key     string `json:"key"`
	ETag    string `json:"etag"`
	Size    int64  `json:"size"`
	Members int    `json:"members"`
	Bytes   int    `json:"bytes"`
	SHA256  string `json:"sha256"`
}

// errStale is a persisted index of another version of the shard, or none.
var errStale = errors.New("no persisted index of this version")

// Subdir is the directory of the cache dir that holds persisted indexes.
const Subdir = "indexes"

// persistPath is the file of obj's index.
func persistPath(dir, source, key string) string {
	sum := sha256.Sum256([]byte(source + "\x00" + key))
	return filepath.Join(dir, Subdir, hex.EncodeToString(sum[:16])+".jsonl")
}

// save persists body, the rendered index of obj with members lines.
func save(dir, source string, obj store.Object, body []byte) error {
	final := persistPath(dir, source, obj.Key)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	head, err := json.Marshal(persistHeader{
		Version: persistVersion, Source: source, Key: obj.Key, ETag: obj.ETag, Size: obj.Size,
		Members: bytes.Count(body, []byte{'\n'}), Bytes: len(body), SHA256: hex.EncodeToString(sum[:]),
	})
	if err != nil {
		return err
	}
	// Atomic, not durable: an index lost to a power loss is rebuilt from
	// the shard's headers.
	return atomicfile.WriteFile(final, atomicfile.Atomic, append(append(head, '\n'), body...))
}

// load reads the persisted index of obj: errStale when there is none of
// this version, another error when the file is not a whole index.
func load(dir, source string, obj store.Object) ([]byte, error) {
	p := persistPath(dir, source, obj.Key)
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errStale
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	raw := make([]byte, st.Size)
	if _, err := f.ReadAt(raw, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	line, body, ok := bytes.Cut(raw, []byte{'\n'})
	var h persistHeader
	if !ok || json.Unmarshal(line, &h) != nil || h.Version != persistVersion {
		return nil, fmt.Errorf("%s: not an index this release wrote", p)
	}
	if h.Source != source || h.Key != obj.Key || h.ETag != obj.ETag || h.Size != obj.Size {
		return nil, errStale
	}
	sum := sha256.Sum256(body)
	if len(body) != h.Bytes || hex.EncodeToString(sum[:]) != h.SHA256 || bytes.Count(body, []byte{'\n'}) != h.Members {
		return nil, fmt.Errorf("%s: %d bytes whose checksum does not match its header (cut short or changed)", p, len(body))
	}
	return body, nil
}
