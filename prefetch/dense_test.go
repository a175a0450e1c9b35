package prefetch

import "testing"

func TestClassify(t *testing.T) {
	const (
		mib = int64(1) << 20
		gib = 1024 * mib
	)
	for _, tc := range []struct {
		name string
		a    RandomAccess
		want Density
	}{
		{"one read of a small shard is a peek", RandomAccess{64 * mib, mib, gib, 1}, Sparse},
		{"a second block of a small shard", RandomAccess{64 * mib, mib, gib, 2}, Dense},
		{"a shard of exactly budget/8", RandomAccess{128 * mib, mib, gib, 2}, Dense},
		{"a shard just over budget/8", RandomAccess{128*mib + 1, mib, gib, 2}, Sparse},
		{"200 random reads of 1 GiB touch ~180 blocks", RandomAccess{gib, mib, gib, 180}, Sparse},
		{"300 random reads of 1 GiB touch ~260 blocks", RandomAccess{gib, mib, gib, 260}, Sparse},
		{"half of 1 GiB touched", RandomAccess{gib, mib, gib, 512}, Dense},
		{"just under half", RandomAccess{gib, mib, gib, 511}, Sparse},
		{"a small budget makes no object small", RandomAccess{64 * mib, mib, 256 * mib, 8}, Sparse},
		{"one block of a one-block object", RandomAccess{mib, mib, gib, 1}, Sparse},
		{"an empty object", RandomAccess{0, mib, gib, 5}, Sparse},
		{"a 100 GiB object, half touched", RandomAccess{100 * gib, mib, gib, 51200}, Dense},
		{"a 100 GiB object, a quarter touched", RandomAccess{100 * gib, mib, gib, 25600}, Sparse},
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
