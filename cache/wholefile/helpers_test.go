package wholefile

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardfs/shardfs/cache/internal/cachetest"
)

// testShard is a shard with deterministic random content, and its name
// for the tier.
type testShard struct {
	s    Shard
	data []byte
}

func newTestShard(key string, size int64) testShard {
	rng := rand.New(rand.NewPCG(uint64(size), uint64(len(key))))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return testShard{s: shardOf(key, size), data: data}
}

// shardOf is the name of newTestShard(key, size), without its bytes.
func shardOf(key string, size int64) Shard {
	etag := string(rune('a' + len(key)%26))
	return Shard{ID: shardID(key, etag), Key: key, ETag: etag, Size: size}
}

// shardID stands for the cache's version id of key at etag.
func shardID(key, etag string) [16]byte {
	sum := sha256.Sum256([]byte(key + "\x00" + etag))
	return [16]byte(sum[:16])
}

// read is a ReadFunc of the shard's bytes.
func (o testShard) read(p []byte, off int64) bool {
	copy(p, o.data[off:])
	return true
}

// openTier opens the tier of cacheDir with quota and closes it when the
// test ends.
func openTier(t *testing.T, cacheDir string, quota int64) *Tier {
	t.Helper()
	return openTierLogged(t, cacheDir, quota, nil)
}

func openTierLogged(t *testing.T, cacheDir string, quota int64, log *slog.Logger) *Tier {
	t.Helper()
	w, err := Open(cacheDir, quota, log)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// mustMake makes o's file from its bytes.
func mustMake(t *testing.T, w *Tier, o testShard) {
	t.Helper()
	ok, err := w.Make(context.Background(), o.s, o.read)
	if err != nil || !ok {
		t.Fatalf("Make(%s) = %v, %v; want true", o.s.Key, ok, err)
	}
}

// mustReadWhole reads o's file through OpenFile and fails unless it holds
// exactly o's bytes.
func mustReadWhole(t *testing.T, w *Tier, o testShard) {
	t.Helper()
	f, ok := w.OpenFile(o.s)
	cachetest.MustHold(t, f, ok, o.s.Key, o.data)
}

// mustNotOpen fails if OpenFile hands out o's file.
func mustNotOpen(t *testing.T, w *Tier, o testShard, why string) {
	t.Helper()
	if f, ok := w.OpenFile(o.s); ok {
		f.Close()
		t.Fatalf("%s: %s's whole-shard file was handed out", why, o.s.Key)
	}
}

// wantChecks fails unless the tier made checks checks and dropped fails
// files by them.
func wantChecks(t *testing.T, w *Tier, checks, fails uint64, why string) {
	t.Helper()
	if st := w.Stats(); st.Checks != checks || st.CheckFails != fails {
		t.Fatalf("%s: %d checks, %d failed; want %d and %d", why, st.Checks, st.CheckFails, checks, fails)
	}
}

// pathOf is o's file in cacheDir.
func pathOf(cacheDir string, o testShard) string {
	return filepath.Join(cacheDir, DirName, Name(o.s.ID))
}

// wholeEntries lists the shards dir of cacheDir, the journal left out.
func wholeEntries(t *testing.T, cacheDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(wholeDir(cacheDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != JournalName {
			names = append(names, e.Name())
		}
	}
	return names
}
