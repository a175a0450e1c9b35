package prefetch

import "testing"

func TestClassify(t *testing.T) {
	const (
		kib = int64(1) << 10
		mib = 1024 * kib
		gib = 1024 * mib
		tib = 1024 * gib
	)
	for _, tc := range []struct {
		name string
		a    RandomAccess
		want Density
	}{
		{"one read of a small shard is a peek", RandomAccess{64 * mib, mib, gib, 1, tib, 0}, Sparse},
		{"a second block of a small shard", RandomAccess{64 * mib, mib, gib, 2, tib, 2 * mib}, Sparse},
		{"6 random 1 MiB reads of a small shard", RandomAccess{64 * mib, mib, gib, 12, tib, 6 * mib}, Sparse},
		{"a quarter of a small shard touched", RandomAccess{64 * mib, mib, gib, 16, tib, 16 * mib}, Sparse},
		{"half of a small shard taken", RandomAccess{64 * mib, mib, gib, 40, tib, 32 * mib}, Dense},
		{"just under half of a small shard taken", RandomAccess{64 * mib, mib, gib, 40, tib, 32*mib - 1}, Sparse},
		{"half of a shard of exactly budget/8 taken", RandomAccess{128 * mib, mib, gib, 64, tib, 64 * mib}, Dense},
		{"a shard just over budget/8, a quarter touched", RandomAccess{128*mib + 1024*kib, mib, gib, 33, tib, 0}, Dense},
		{"200 random reads of 1 GiB touch ~180 blocks", RandomAccess{gib, mib, gib, 180, tib, 0}, Sparse},
		{"250 random reads of 1 GiB touch ~220 blocks", RandomAccess{gib, mib, gib, 220, tib, 0}, Sparse},
		{"a quarter of 1 GiB touched", RandomAccess{gib, mib, gib, 256, tib, 0}, Dense},
		{"just under a quarter", RandomAccess{gib, mib, gib, 255, tib, 0}, Sparse},
		{"a small budget makes no object small", RandomAccess{64 * mib, mib, 256 * mib, 8, tib, 0}, Sparse},
		{"one block of a one-block object", RandomAccess{mib, mib, gib, 1, tib, 0}, Sparse},
		{"an empty object", RandomAccess{0, mib, gib, 5, tib, 0}, Sparse},
		{"a 100 GiB object, a quarter touched", RandomAccess{100 * gib, mib, gib, 25600, tib, 0}, Dense},
		{"a 100 GiB object, an eighth touched", RandomAccess{100 * gib, mib, gib, 12800, tib, 0}, Sparse},
		{"a quarter of an object larger than the cache", RandomAccess{2 * gib, mib, gib, 512, gib + 512*mib, 0}, Sparse},
		{"all of an object larger than the cache", RandomAccess{2 * gib, mib, gib, 2048, gib + 512*mib, 0}, Sparse},
		{"an object the cache just holds", RandomAccess{2 * gib, mib, gib, 512, 2 * gib, 0}, Dense},
		{"a small object and no cache", RandomAccess{64 * mib, mib, gib, 8, 0, 0}, Sparse},
		{"128 reads of 256 KiB have taken a 64th of 2 GiB", RandomAccess{2 * gib, mib, gib, 128, tib, 128 * 256 * kib}, Dense},
		{"127 reads of 256 KiB", RandomAccess{2 * gib, mib, gib, 127, tib, 127 * 256 * kib}, Sparse},
		{"200 random 4 KiB reads of 1 GiB", RandomAccess{gib, mib, gib, 200, tib, 200 * 4 * kib}, Sparse},
		{"a 64th taken of an object larger than the cache", RandomAccess{2 * gib, mib, gib, 128, gib, 32 * mib}, Sparse},
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
