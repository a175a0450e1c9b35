package main

import (
	"fmt"
	"path"

	"github.com/shardfs/shardfs/store"
)

// selectShards keeps the objects matching include (a glob on the key; ""
// keeps all) and then this rank's share, objects[rank::world] in listing
// order: the split a loader makes with shards[rank::world].
func selectShards(objs []store.Object, include string, rank, world int) ([]store.Object, error) {
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("--rank %d --world %d: want 0 <= rank < world", rank, world)
	}
	var matched []store.Object
	for _, o := range objs {
		if include != "" {
			ok, err := path.Match(include, o.Key)
			if err != nil {
				return nil, fmt.Errorf("--include %q: %w", include, err)
			}
			if !ok {
				continue
			}
		}
		matched = append(matched, o)
	}
	var mine []store.Object
	for i := rank; i < len(matched); i += world {
		mine = append(mine, matched[i])
	}
	return mine, nil
}
