package prefetch

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type readOp struct{ off, n int64 }

// seqReads returns count reads of n bytes each, back to back from off.
func seqReads(off, n int64, count int) []readOp {
	ops := make([]readOp, count)
	for i := range ops {
		ops[i] = readOp{off + int64(i)*n, n}
	}
	return ops
}

func TestPolicy(t *testing.T) {
	const K = 1 << 10
	cfg := DefaultConfig()
	cfg.BlockSize, cfg.PartSize, cfg.MaxPrefetch, cfg.Memory, cfg.ReorderWindow = K, 4*K, 16*K, 64*K, 8*K
	const big = 1000 * K
	cases := []struct {
		name  string
		size  int64
		prime int64
		reads []readOp
		want  Plan // for the last read
	}{
		{
			name: "first read at 0 is sequential with one block ahead", size: big,
			reads: seqReads(0, K, 1),
			want:  Plan{Sequential: true, Need: Range{0, K}, Ahead: Range{K, 2 * K}, Keep: Range{0, 2 * K}, Window: K},
		},
		{
			name: "window doubles as the reader consumes it", size: big,
			reads: seqReads(0, K, 2),
			want:  Plan{Sequential: true, Need: Range{K, 2 * K}, Ahead: Range{2 * K, 4 * K}, Keep: Range{0, 4 * K}, Window: 2 * K},
		},
		{
			name: "a window of a part or more is fetched in whole parts", size: big,
			reads: seqReads(0, K, 3),
			want:  Plan{Sequential: true, Need: Range{2 * K, 3 * K}, Ahead: Range{3 * K, 8 * K}, Keep: Range{0, 8 * K}, Window: 4 * K},
		},
		{
			name: "window stops at MaxPrefetch", size: big,
			reads: seqReads(0, K, 64),
			want:  Plan{Sequential: true, Need: Range{63 * K, 64 * K}, Ahead: Range{64 * K, 80 * K}, Keep: Range{56 * K, 80 * K}, Window: 16 * K},
		},
		{
			name: "kernel reads out of order within the reorder window stay sequential", size: big,
			reads: []readOp{{0, K}, {3 * K, K}, {K, K}, {2 * K, K}, {5 * K, K}, {4 * K, K}},
			want:  Plan{Sequential: true, Need: Range{4 * K, 5 * K}, Ahead: Range{5 * K, 12 * K}, Keep: Range{0, 12 * K}, Window: 4 * K},
		},
		{
			name: "a late read behind the front is sequential", size: big,
			reads: append(seqReads(0, K, 16), readOp{10 * K, K}),
			want:  Plan{Sequential: true, Need: Range{10 * K, 11 * K}, Ahead: Range{11 * K, 32 * K}, Keep: Range{8 * K, 32 * K}, Window: 16 * K},
		},
		{
			name: "a read past the reorder window is a seek", size: big,
			reads: append(seqReads(0, K, 16), readOp{30 * K, K}),
			want:  Plan{Need: Range{30 * K, 31 * K}, Keep: Range{30 * K, 31 * K}},
		},
		{
			name: "a seek fetches only the blocks the read touches", size: big,
			reads: append(seqReads(0, K, 8), readOp{500*K + 100, 4 * K}),
			want:  Plan{Need: Range{500 * K, 505 * K}, Keep: Range{500 * K, 505 * K}},
		},
		{
			name: "random small reads never read ahead", size: big,
			reads: []readOp{{300 * K, 4}, {100 * K, 4}, {700 * K, 4}, {20*K + 512, 4}},
			want:  Plan{Need: Range{20 * K, 21 * K}, Keep: Range{20 * K, 21 * K}},
		},
		{
			name: "near reads after a seek covering four blocks start a new sequential run", size: big,
			reads: seqReads(300*K, K, 4),
			want:  Plan{Sequential: true, Need: Range{303 * K, 304 * K}, Ahead: Range{304 * K, 305 * K}, Keep: Range{296 * K, 305 * K}, Window: K},
		},
		{
			name: "near reads after a seek covering fewer than four blocks stay random, one block ahead", size: big,
			reads: seqReads(300*K, K, 3),
			want:  Plan{Need: Range{302 * K, 303 * K}, Ahead: Range{303 * K, 304 * K}, Keep: Range{302 * K, 304 * K}},
		},
		{
			name: "random reads a few blocks apart do not make a run", size: big,
			reads: []readOp{{300 * K, K}, {304 * K, K}, {308 * K, K}, {301*K + 512, K}, {312 * K, K}},
			want:  Plan{Need: Range{312 * K, 313 * K}, Keep: Range{312 * K, 313 * K}},
		},
		{
			name: "a large random read split by the kernel, out of order, stays random, one block ahead", size: big,
			reads: []readOp{{501*K + 512, K / 2}, {500 * K, K}, {501 * K, K / 2}, {502 * K, K}},
			want:  Plan{Need: Range{502 * K, 503 * K}, Ahead: Range{503 * K, 504 * K}, Keep: Range{502 * K, 504 * K}},
		},
		{
			name: "the window is clipped at the end and the rest spills", size: 20*K + 500,
			reads: seqReads(0, K, 17),
			want: Plan{Sequential: true, Need: Range{16 * K, 17 * K}, Ahead: Range{17 * K, 20*K + 500},
				Keep: Range{9 * K, 20*K + 500}, Spill: 33*K - (20*K + 500), Window: 16 * K},
		},
		{
			name: "the last partial block ends at the object size", size: 20*K + 500,
			reads: append(seqReads(0, K, 20), readOp{20 * K, K}),
			want: Plan{Sequential: true, Need: Range{20 * K, 20*K + 500}, Keep: Range{12 * K, 20*K + 500},
				Spill: 16 * K, Window: 16 * K},
		},
		{
			name: "primed handle continues the window from 0", size: big, prime: 4 * K,
			reads: seqReads(0, K, 1),
			want:  Plan{Sequential: true, Need: Range{0, K}, Ahead: Range{K, 12 * K}, Keep: Range{0, 12 * K}, Window: 8 * K},
		},
		{
			name: "primed window is capped at MaxPrefetch", size: big, prime: 1 << 20,
			reads: seqReads(0, K, 1),
			want:  Plan{Sequential: true, Need: Range{0, K}, Ahead: Range{K, 20 * K}, Keep: Range{0, 20 * K}, Window: 16 * K},
		},
		{
			name: "primed handle whose first read is far away seeks", size: big, prime: 8 * K,
			reads: []readOp{{100 * K, K}},
			want:  Plan{Need: Range{100 * K, 101 * K}, Keep: Range{100 * K, 101 * K}},
		},
		{
			name: "a read at the end of the object needs nothing", size: 10 * K,
			reads: []readOp{{0, K}, {3 * K, K}, {10 * K, K}},
			want:  Plan{Sequential: true, Need: Range{10 * K, 10 * K}, Keep: Range{2 * K, 10 * K}, Spill: 4 * K, Window: 4 * K},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(cfg, tc.size)
			if tc.prime > 0 {
				p.Prime(tc.prime)
			}
			var got Plan
			for _, r := range tc.reads {
				got = p.Read(r.off, r.n)
			}
			if got != tc.want {
				t.Errorf("after %d reads:\n got  %+v\n want %+v", len(tc.reads), got, tc.want)
			}
			if got.Sequential != p.Sequential() {
				t.Errorf("plan says sequential=%v, policy says %v", got.Sequential, p.Sequential())
			}
		})
	}
}

// TestPolicyRandomReadsCostAtMostTwoBlocks: over many random 4 KiB reads
// of a 1 GiB object, what the policy asks to fetch averages at most two
// blocks per read, even counting reads that happen to land near each other.
func TestPolicyRandomReadsCostAtMostTwoBlocks(t *testing.T) {
	cfg := DefaultConfig()
	const size = 1 << 30
	p := NewPolicy(cfg, size)
	rng := rand.New(rand.NewPCG(1, 2))
	const reads = 20000
	var asked int64
	for range reads {
		plan := p.Read(rng.Int64N(size-4096), 4096)
		asked += plan.Need.Len() + plan.Ahead.Len()
	}
	if limit := int64(reads) * 2 * cfg.BlockSize; asked > limit {
		t.Fatalf("random reads asked for %d bytes, more than 2 blocks per read (%d)", asked, limit)
	}
}

// TestPolicyShuffledKernelReadsStaySequential feeds 1 MiB reads in the
// order the kernel's async read-ahead may deliver them: each group of 16
// shuffled, except the handle's first read at 0, which the kernel sends
// alone (a synchronous read). Every read must be seen as sequential, and
// the window must reach MaxPrefetch.
func TestPolicyShuffledKernelReadsStaySequential(t *testing.T) {
	cfg := DefaultConfig()
	const mib = 1 << 20
	const size = 1 << 30
	p := NewPolicy(cfg, size)
	rng := rand.New(rand.NewPCG(3, 4))
	var last Plan
	for group := int64(0); group < size/mib; group += 16 {
		order := rng.Perm(16)
		if group == 0 {
			order = append([]int{0}, slices.DeleteFunc(order, func(i int) bool { return i == 0 })...)
		}
		for _, i := range order {
			last = p.Read((group+int64(i))*mib, mib)
			if !last.Sequential {
				t.Fatalf("read at %d MiB seen as random", group+int64(i))
			}
		}
	}
	if last.Window != cfg.MaxPrefetch {
		t.Fatalf("window %d after reading 1 GiB, want %d", last.Window, cfg.MaxPrefetch)
	}
}
