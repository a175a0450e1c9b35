package listing

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/store"
)

// A persisted listing is one file per source under DIR/listings: a header
// line naming the source, when it was listed and how many objects follow,
// then the objects as manifest lines. It is replaced whole (package
// atomicfile), so a reader sees a whole listing or none; the count in the
// header catches a file cut short all the same.

const persistVersion = 1

type header struct {
	Version  int       `json:"shardfs_listing"`
	Key      string    `json:"source"`
	ListedAt time.Time `json:"listed_at"`
	Objects  int       `json:"objects"`
}

// Subdir is the directory of the cache dir that holds persisted listings.
const Subdir = "listings"

// path is the file of a source's listing.
func path(dir, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(dir, Subdir, hex.EncodeToString(sum[:16])+".jsonl")
}

// save persists objs as the listing of key, listed at listedAt. The file
// is durable: a mount after a power loss finds it, or the one it replaced,
// and sends no LIST.
func save(dir, key string, objs []store.Object, listedAt time.Time) error {
	final := path(dir, key)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(final, atomicfile.Durable, func(w io.Writer) error {
		err := json.NewEncoder(w).Encode(header{Version: persistVersion, Key: key, ListedAt: listedAt, Objects: len(objs)})
		if err != nil {
			return err
		}
		return store.WriteManifest(w, objs)
	})
}

// errNoCopy is a source with no persisted listing.
var errNoCopy = errors.New("no persisted listing")

// load reads the persisted listing of key. A file that does not hold one
// whole listing of this source is an error, never a partial listing.
// First it removes what a mount killed while writing the listing left
// beside it: load runs at mount, before this mount's own writes, and the
// cache dir serves one mount at a time.
func load(dir, key string) ([]store.Object, time.Time, error) {
	p := path(dir, key)
	if err := atomicfile.RemoveTemps(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, time.Time{}, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, time.Time{}, errNoCopy
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	line, err := r.ReadBytes('\n')
	if err != nil && err != io.EOF {
		return nil, time.Time{}, fmt.Errorf("%s: %w", p, err)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil || h.Version != persistVersion {
		return nil, time.Time{}, fmt.Errorf("%s: not a listing this release wrote", p)
	}
	if h.Key != key {
		return nil, time.Time{}, fmt.Errorf("%s: the listing of %s, not %s", p, h.Key, key)
	}
	objs, err := store.ReadManifest(r)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%s: %w", p, err)
	}
	if len(objs) != h.Objects {
		return nil, time.Time{}, fmt.Errorf("%s: %d objects, the header says %d (cut short)", p, len(objs), h.Objects)
	}
	return objs, h.ListedAt, nil
}
