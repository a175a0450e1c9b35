package main

import (
	"fmt"
	"testing"

	"github.com/shardfs/shardfs/store"
)

func TestSelectShardsRanksCoverEveryShardOnce(t *testing.T) {
	var objs []store.Object
	for i := 0; i < 23; i++ {
		objs = append(objs, store.Object{Key: fmt.Sprintf("train/shard-%03d.tar", i)})
	}
	objs = append(objs, store.Object{Key: "val/shard-000.tar"})
	for _, world := range []int{1, 2, 3, 8, 30} {
		seen := map[string]int{}
		for rank := 0; rank < world; rank++ {
			mine, err := selectShards(objs, "train/*", rank, world)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range mine {
				seen[o.Key]++
			}
		}
		if len(seen) != 23 {
			t.Fatalf("world %d: %d shards warmed, want 23", world, len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("world %d: %s warmed %d times", world, k, n)
			}
		}
	}
	if _, err := selectShards(objs, "", 2, 2); err == nil {
		t.Fatal("rank 2 of world 2 accepted")
	}
}
