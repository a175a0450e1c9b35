package warm

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// Through a mount, every shard is read whole from its file there; a shard
// whose file cannot be read is named with its error. (A plain directory
// stands for the mount: a file that is not the mount's answers the
// fill-cache ioctl with an error, which changes nothing.)
func TestThroughMountReadsEveryShard(t *testing.T) {
	dir := t.TempDir()
	objs := []store.Object{{Key: "a.tar", Size: 3*bs + 1}, {Key: "gone.tar", Size: 10}, {Key: "sub/b.tar", Size: 2 * bs}}
	for _, o := range []store.Object{objs[0], objs[2]} {
		path := filepath.Join(dir, o.Key)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, o.Size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var progress int64
	cfg := testConfig
	cfg.Progress = func(n int64) { progress += n } // one shard at a time: Concurrency/4 is 0
	res := ThroughMount(context.Background(), PlanAll(objs), dir, cfg)
	if want := objs[0].Size + objs[2].Size; res.Fetched != want || progress != want {
		t.Errorf("%d bytes read, %d told to Progress; want %d", res.Fetched, progress, want)
	}
	if res.Done != 2 || !slices.Equal(res.FailedKeys(), []string{"gone.tar"}) || !errors.Is(res.Failed["gone.tar"], fs.ErrNotExist) {
		t.Errorf("result %+v: want 2 done and gone.tar failed for want of its file", res)
	}
}
