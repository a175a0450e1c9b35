package main

import (
	"testing"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/store"
)

func TestPageCacheAutoReadsDirectlyOnlyWhatOutgrowsRAM(t *testing.T) {
	objs := []store.Object{{Key: "a", Size: 6 << 30}, {Key: "b", Size: 6 << 30}} // 12 GiB
	auto, err := parsePageCache("auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		choice pageCacheChoice
		ram    int64
		want   shardfs.PageCache
	}{
		{auto, 8 << 30, shardfs.DirectIO},
		{auto, 16 << 30, shardfs.KeepPages},
		{auto, 0, shardfs.KeepPages}, // RAM unknown
		{pageCacheChoice{fixed: shardfs.KeepPages}, 1 << 30, shardfs.KeepPages},
		{pageCacheChoice{fixed: shardfs.DirectIO}, 64 << 30, shardfs.DirectIO},
	} {
		if got := tc.choice.resolve(objs, tc.ram); got != tc.want {
			t.Errorf("%+v with %d GiB of RAM: %v, want %v", tc.choice, tc.ram>>30, got, tc.want)
		}
	}
}

func TestPageCacheFlagValues(t *testing.T) {
	for s, want := range map[string]pageCacheChoice{
		"keep":   {fixed: shardfs.KeepPages},
		"direct": {fixed: shardfs.DirectIO},
		"auto":   {auto: true},
	} {
		if got, err := parsePageCache(s); err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", s, got, err, want)
		}
	}
	if _, err := parsePageCache("sometimes"); err == nil {
		t.Error(`"sometimes" accepted`)
	}
}
