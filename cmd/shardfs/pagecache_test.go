package main

import (
	"testing"

	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/store"
)

func TestPageCacheAutoReadsDirectlyWhatOutgrowsRAMOrHasWholeFiles(t *testing.T) {
	objs := []store.Object{{Key: "a", Size: 6 << 30}, {Key: "b", Size: 6 << 30}} // 12 GiB
	auto, err := parsePageCache("auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		choice     pageCacheChoice
		ram        int64
		wholeFiles bool
		want       shardfs.PageCache
	}{
		{auto, 8 << 30, false, shardfs.DirectIO},
		{auto, 8 << 30, true, shardfs.DirectIO},
		{auto, 16 << 30, false, shardfs.KeepPages},
		{auto, 16 << 30, true, shardfs.DirectBesideWholeFiles},
		{auto, 0, false, shardfs.KeepPages}, // RAM unknown
		{pageCacheChoice{fixed: shardfs.KeepPages}, 1 << 30, true, shardfs.KeepPages},
		{pageCacheChoice{fixed: shardfs.DirectIO}, 64 << 30, false, shardfs.DirectIO},
	} {
		if got := tc.choice.resolve(objs, tc.ram, tc.wholeFiles); got != tc.want {
			t.Errorf("%+v with %d GiB of RAM, whole-shard files %v: %v, want %v", tc.choice, tc.ram>>30, tc.wholeFiles, got, tc.want)
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
