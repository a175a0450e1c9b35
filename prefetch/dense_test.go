package prefetch

import "testing"

func TestClassify(t *testing.T) {
	const (
		mib = int64(1) << 20
		gib = 1024 * mib
		tib = 1024 * gib
	)
	for _, tc := range []struct {
		name string
		a    RandomAccess
		want Density
	}{
		{"one read of a small shard is a peek", RandomAccess{64 * mib, mib, gib, 1, tib}, Sparse},
		{"a second block of a small shard", RandomAccess{64 * mib, mib, gib, 2, tib}, Dense},
		{"a shard of exactly budget/8", RandomAccess{128 * mib, mib, gib, 2, tib}, Dense},
		{"a shard just over budget/8", RandomAccess{128*mib + 1, mib, gib, 2, tib}, Sparse},
		{"200 random reads of 1 GiB touch ~180 blocks", RandomAccess{gib, mib, gib, 180, tib}, Sparse},
		{"250 random reads of 1 GiB touch ~220 blocks", RandomAccess{gib, mib, gib, 220, tib}, Sparse},
		{"a quarter of 1 GiB touched", RandomAccess{gib, mib, gib, 256, tib}, Dense},
		{"just under a quarter", RandomAccess{gib, mib, gib, 255, tib}, Sparse},
		{"a small budget makes no object small", RandomAccess{64 * mib, mib, 256 * mib, 8, tib}, Sparse},
		{"one block of a one-block object", RandomAccess{mib, mib, gib, 1, tib}, Sparse},
		{"an empty object", RandomAccess{0, mib, gib, 5, tib}, Sparse},
		{"a 100 GiB object, a quarter touched", RandomAccess{100 * gib, mib, gib, 25600, tib}, Dense},
		{"a 100 GiB object, an eighth touched", RandomAccess{100 * gib, mib, gib, 12800, tib}, Sparse},
		{"a quarter of an object larger than the cache", RandomAccess{2 * gib, mib, gib, 512, gib + 512*mib}, Sparse},
		{"all of an object larger than the cache", RandomAccess{2 * gib, mib, gib, 2048, gib + 512*mib}, Sparse},
		{"an object the cache just holds", RandomAccess{2 * gib, mib, gib, 512, 2 * gib}, Dense},
		{"a small object and no cache", RandomAccess{64 * mib, mib, gib, 8, 0}, Sparse},
	} {
		if got := Classify(tc.a); got != tc.want {
			t.Errorf("%s: Classify(%+v) = %v, want %v", tc.name, tc.a, got, tc.want)
		}
	}
}

func TestRandomAccessCountsEachBlockOnce(t *testing.T) {
	a := randomAccess{touched: make([]uint64, 2)}
	for _, b := range []int64{0, 63, 64, 0, 127, 63, 128, -1} {
		a.touch(b)
	}
	if a.count != 4 {
		t.Fatalf("count = %d after touching blocks 0, 63, 64, 127 (and again, and out of range), want 4", a.count)
	}
}
