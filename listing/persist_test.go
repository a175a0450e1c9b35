package listing

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/store"
)

// What a mount killed while persisting a listing leaves (a torn file of
// atomicfile's temporary form beside the listing) is never read, and the
// next load removes it and returns the listing that stood.
func TestLoadRemovesWhatAKilledSaveLeft(t *testing.T) {
	dir := t.TempDir()
	key := "s3://b/p"
	objs := []store.Object{{Key: "a.tar", Size: 10, ETag: "e1"}, {Key: "b.tar", Size: 20, ETag: "e2"}}
	at := time.Unix(1700000000, 0).UTC()
	if err := save(dir, key, objs, at); err != nil {
		t.Fatal(err)
	}
	torn, err := atomicfile.Create(path(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	torn.Write([]byte(`{"shardfs_listing":1,"source":"s3://b/p","objects":3}` + "\n" + `{"key":"c.t`))
	// Not committed nor discarded: as a kill -9 leaves it.

	got, gotAt, err := load(dir, key)
	if err != nil || !slices.Equal(got, objs) || !gotAt.Equal(at) {
		t.Fatalf("load = %v, %v, %v; want the saved listing", got, gotAt, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, Subdir))
	if len(entries) != 1 || entries[0].Name() != filepath.Base(path(dir, key)) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("after load the listings dir holds %v; want the listing alone", names)
	}
}
