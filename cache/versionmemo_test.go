package cache

import (
	"fmt"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// The memo answers what the hash answers, for more objects than it has
// slots (collisions compute again), and a new ETag of the same key is a
// new version, never the remembered one: blocks of a changed object must
// not be served as the current ones.
func TestRememberedVersionsAreTheVersions(t *testing.T) {
	c := &Cache{cfg: Config{Namespace: "ns", KeyPrefix: "wds/"}, versions: newVersionMemo()}
	for round := range 2 {
		for i := range 3 * versionMemoSlots {
			obj := store.Object{Key: fmt.Sprintf("shard-%05d.tar", i), ETag: fmt.Sprintf("etag-%d", round)}
			for range 2 { // the second from the memo when the slot kept it
				if got, want := c.version(obj), c.cfg.version(obj); got != want {
					t.Fatalf("round %d, %s: remembered version %x, want %x", round, obj.Key, got, want)
				}
			}
		}
	}
	a := store.Object{Key: "a.tar", ETag: "1"}
	b := store.Object{Key: "a.tar", ETag: "2"}
	if c.version(a) == c.version(b) {
		t.Fatal("two ETags of one key got one version")
	}
}
