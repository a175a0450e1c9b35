package prefetch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
)

func TestCoalesceJoinsTouchingBlocksWithinOnePart(t *testing.T) {
	const part = 8 * mib
	for _, tc := range []struct {
		name     string
		span, b  Range
		want     Range
		joinable bool
	}{
		{"same block", Range{0, mib}, Range{0, mib}, Range{0, mib}, true},
		{"next block", Range{0, mib}, Range{mib, 2 * mib}, Range{0, 2 * mib}, true},
		{"block before", Range{2 * mib, 3 * mib}, Range{mib, 2 * mib}, Range{mib, 3 * mib}, true},
		{"a block between", Range{0, mib}, Range{2 * mib, 3 * mib}, Range{0, mib}, false},
		{"across a part boundary", Range{7 * mib, 8 * mib}, Range{8 * mib, 9 * mib}, Range{7 * mib, 8 * mib}, false},
		{"fills the part", Range{0, 7 * mib}, Range{7 * mib, 8 * mib}, Range{0, 8 * mib}, true},
		{"inside the next part", Range{8 * mib, 9 * mib}, Range{9 * mib, 10 * mib}, Range{8 * mib, 10 * mib}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := coalesce(tc.span, tc.b, part)
			if got != tc.want || ok != tc.joinable {
				t.Fatalf("coalesce(%v, %v) = %v, %v; want %v, %v", tc.span, tc.b, got, ok, tc.want, tc.joinable)
			}
		})
	}
}

func TestTrimOverlapKeepsOnlyNewBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prev, r    Range
		want       Range
		overlapped bool
	}{
		{"after", Range{0, 100}, Range{100, 200}, Range{100, 200}, false},
		{"before", Range{100, 200}, Range{0, 100}, Range{0, 100}, false},
		{"duplicate", Range{0, 100}, Range{0, 100}, Range{0, 0}, true},
		{"inside", Range{0, 100}, Range{10, 20}, Range{10, 10}, true},
		{"tail overlaps", Range{0, 100}, Range{50, 150}, Range{100, 150}, true},
		{"head overlaps", Range{100, 200}, Range{50, 150}, Range{50, 100}, true},
		{"covers prev", Range{100, 200}, Range{50, 250}, Range{50, 100}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := trimOverlap(tc.prev, tc.r)
			if ok != tc.overlapped || (got.Len() != tc.want.Len()) || (!got.Empty() && got != tc.want) {
				t.Fatalf("trimOverlap(%v, %v) = %v, %v; want %v, %v", tc.prev, tc.r, got, ok, tc.want, tc.overlapped)
			}
		})
	}
}

// A schedule's ranges become part-size GETs: neighbours in one object and
// one part share a GET, and what overlaps the owner's previous range is
// not asked for twice.
func TestScheduleCoalescesNeighbouringRangesIntoGETs(t *testing.T) {
	a, b := fakeObject("a.tar", 64*mib), fakeObject("b.tar", 64*mib)
	sr := func(o store.Object, off, n int64) Scheduled { return Scheduled{Obj: o, Off: off, Len: n} }
	for _, tc := range []struct {
		name              string
		ranges            []Scheduled
		gets              int64
		bytes             int64
		queued, overlap   int
		getsAt            map[string]int64 // "key@off" → GET size
		wantNoGetAtBlocks []int64
	}{
		{name: "neighbours share one GET", ranges: []Scheduled{sr(a, 0, 100*kib), sr(a, 100*kib, 100*kib), sr(a, 200*kib, 900*kib)},
			gets: 1, bytes: 2 * mib, queued: 3},
		{name: "a block between splits", ranges: []Scheduled{sr(a, 0, 100*kib), sr(a, 3*mib, 100*kib)},
			gets: 2, bytes: 2 * mib, queued: 2},
		{name: "a part boundary splits", ranges: []Scheduled{sr(a, 7*mib+512*kib, 400*kib), sr(a, 7*mib+912*kib, 500*kib)},
			gets: 2, bytes: 2 * mib, queued: 2},
		{name: "another object between", ranges: []Scheduled{sr(a, 0, 100*kib), sr(b, 0, 100*kib), sr(a, 100*kib, 100*kib)},
			gets: 2, bytes: 2 * mib, queued: 3},
		{name: "overlap trimmed", ranges: []Scheduled{sr(a, 0, 200*kib), sr(a, 100*kib, 200*kib)},
			gets: 1, bytes: mib, queued: 2, overlap: 1},
		{name: "overlap is with the range as written", ranges: []Scheduled{sr(a, 0, 100*kib), sr(a, 50*kib, 100*kib), sr(a, 0, 100*kib)},
			gets: 1, bytes: mib, queued: 3, overlap: 2},
		{name: "duplicate dropped", ranges: []Scheduled{sr(a, 0, 100*kib), sr(a, 0, 100*kib)},
			gets: 1, bytes: mib, queued: 1, overlap: 1},
		{name: "last block short", ranges: []Scheduled{sr(fakeObject("c.tar", 3*mib+5), 3*mib, 5)},
			gets: 1, bytes: 5, queued: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{}
			s := newTestEngine(t, DefaultConfig(), f, nil)
			res := s.Schedule(1, tc.ranges)
			settledStats(t, s)
			if res.Queued != tc.queued || res.Overlapping != tc.overlap || res.Full != 0 {
				t.Errorf("result %+v, want %d queued, %d overlapping", res, tc.queued, tc.overlap)
			}
			if g, n := f.gets.Load(), f.askedBytes.Load(); g != tc.gets || n != tc.bytes {
				t.Errorf("%d GETs of %d bytes, want %d of %d", g, n, tc.gets, tc.bytes)
			}
		})
	}
}

// A shuffled epoch read in the schedule's order, a handle per sample, four
// objects: every byte right, each block fetched once (the RAM tier and
// ring keep a block's other samples), reads served from scheduled parts,
// and nothing left charged once the epoch is read.
func TestScheduledEpochFetchesEachBlockOnceAndFreesWhatWasRead(t *testing.T) {
	const sample = 100 * kib
	cfg := DefaultConfig()
	cfg.Memory = 32 * mib // a window of 16 MiB: much less than the data
	c := newRingCache(t, cfg.BlockSize, 64*mib)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	var ranges []Scheduled
	var total int64
	for i := range 4 {
		obj := fakeObject(string(rune('a'+i))+".tar", 12*mib+7*kib)
		total += obj.Size
		for off := int64(0); off < obj.Size; off += sample {
			ranges = append(ranges, Scheduled{Obj: obj, Off: off, Len: min(sample, obj.Size-off)})
		}
	}
	rand.New(rand.NewPCG(15, 4)).Shuffle(len(ranges), func(i, j int) { ranges[i], ranges[j] = ranges[j], ranges[i] })
	if res := s.Schedule(7, ranges); res.Queued != len(ranges) || res.Full != 0 || res.Overlapping != 0 {
		t.Fatalf("schedule of %d ranges: %+v", len(ranges), res)
	}
	buf := make([]byte, sample)
	for _, r := range ranges {
		rd := s.OpenReader(r.Obj, false, 0)
		n, _, err := rd.ReadAt(testContext(t), buf[:r.Len], r.Off)
		rd.Close()
		if err != nil || int64(n) != r.Len || !bytes.Equal(buf[:n], wantBytes(r.Obj, r.Off, n)) {
			t.Fatalf("read %s at %d: n=%d err=%v, or wrong bytes", r.Obj.Key, r.Off, n, err)
		}
	}
	st := settledStats(t, s)
	if asked := f.askedBytes.Load(); asked > total*105/100 {
		t.Errorf("the store was asked for %d bytes to read %d once (%.2fx), want at most 1.05x", asked, total, float64(asked)/float64(total))
	}
	if st.ScheduleParts == 0 || st.ScheduleRead == 0 {
		t.Errorf("no read came from the schedule's parts: %+v", st)
	}
	if st.ScheduleInUseBytes != 0 || st.InUseBytes != 0 || st.ScheduleQueued != 0 {
		t.Errorf("after the epoch: schedule holds %d bytes, parts %d, %d ranges queued; want nothing", st.ScheduleInUseBytes, st.InUseBytes, st.ScheduleQueued)
	}
	if st.PeakInUseBytes > cfg.Memory {
		t.Errorf("peak %d bytes charged, budget %d", st.PeakInUseBytes, cfg.Memory)
	}
	if st.DenseObjects != 0 {
		t.Errorf("%d objects turned dense while a schedule said what comes next", st.DenseObjects)
	}
}

// A schedule nobody reads fetches one window, half the budget, and stops;
// the queue past the cap is refused and counted.
func TestScheduleNobodyReadsStaysWithinItsBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = 16 * mib
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	huge := fakeObject("huge.tar", 1<<40)
	const n = MaxScheduledRanges + 5000
	ranges := make([]Scheduled, n)
	for i := range ranges {
		ranges[i] = Scheduled{Obj: huge, Off: int64(i) * 2 * mib, Len: 4 * kib} // a block apart: no coalescing
	}
	res := s.Schedule(1, ranges)
	st := settledStats(t, s)
	if res.Queued+res.Full != n || res.Full == 0 {
		t.Errorf("result %+v for %d ranges: want every range queued or refused, some refused", res, n)
	}
	if st.ScheduleQueued > MaxScheduledRanges {
		t.Errorf("%d ranges queued, cap %d", st.ScheduleQueued, MaxScheduledRanges)
	}
	if asked := f.askedBytes.Load(); asked > cfg.Memory/2 || st.ScheduleInUseBytes > cfg.Memory/2 {
		t.Errorf("fetched %d bytes, %d held for a schedule nobody reads; want at most half the budget (%d)", asked, st.ScheduleInUseBytes, cfg.Memory/2)
	}
	// Another owner gets only the room left: the queue is full.
	room := MaxScheduledRanges - int(st.ScheduleQueued)
	if res := s.Schedule(2, ranges[:room+10]); res.Full != 10 {
		t.Errorf("a second owner's %d ranges with room for %d: %+v, want 10 refused", room+10, room, res)
	}
	if q := s.Stats().ScheduleQueued; q > MaxScheduledRanges {
		t.Errorf("%d ranges queued, cap %d", q, MaxScheduledRanges)
	}
	// A read elsewhere still gets budget and the right bytes.
	other := fakeObject("other.tar", 20*mib)
	rd := s.OpenReader(other, false, 0)
	defer rd.Close()
	buf := make([]byte, 12*mib)
	if n, _, err := rd.ReadAt(testContext(t), buf, 0); err != nil || !bytes.Equal(buf[:n], wantBytes(other, 0, len(buf))) {
		t.Fatalf("a read beside a full schedule: n=%d err=%v, or wrong bytes", n, err)
	}
}

// Owners past maxScheduleOwners are refused while the others hold ranges.
func TestScheduleRefusesOwnersPastTheCap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = 16 * mib
	f := &fakeFetcher{hold: make(chan struct{})}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("a.tar", 1<<40)
	full := 0
	for owner := range uint64(maxScheduleOwners + 3) {
		full += s.Schedule(owner, []Scheduled{{Obj: obj, Off: int64(owner) * 2 * mib, Len: 10}}).Full
	}
	if full != 3 {
		t.Fatalf("%d owners refused, want 3 past the cap of %d", full, maxScheduleOwners)
	}
}

// A reader that reads a range scheduleReorder past others has gone past
// them: parts kept for them are let go, and the window moves on.
func TestScheduleDropsRangesTheReaderWentPast(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = 16 * mib // a window of 8 one-block parts
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("a.tar", 256*mib)
	var ranges []Scheduled
	for i := range 7 { // ranges 0-6: a part each
		ranges = append(ranges, Scheduled{Obj: obj, Off: int64(i) * 2 * mib, Len: 64 * kib})
	}
	for i := range scheduleReorder + 40 { // ranges 7-302: one part, at 14 MiB
		ranges = append(ranges, Scheduled{Obj: obj, Off: 14*mib + int64(i)*kib, Len: kib})
	}
	last := len(ranges) - 1
	for i := range 8 { // past the window: at 16, 18, ... MiB
		ranges = append(ranges, Scheduled{Obj: obj, Off: 16*mib + int64(i)*2*mib, Len: 64 * kib})
	}
	s.Schedule(1, ranges)
	settledStats(t, s)
	if got := f.getsAt(obj.Key, 16*mib); got != 0 {
		t.Fatalf("a range past the window fetched before anything was read: the window is 8 parts")
	}
	read := func(r Scheduled) {
		t.Helper()
		rd := s.OpenReader(obj, false, 0)
		defer rd.Close()
		buf := make([]byte, r.Len)
		if n, _, err := rd.ReadAt(testContext(t), buf, r.Off); err != nil || !bytes.Equal(buf[:n], wantBytes(obj, r.Off, len(buf))) {
			t.Fatalf("read at %d: n=%d err=%v, or wrong bytes", r.Off, n, err)
		}
	}
	read(ranges[last]) // more than scheduleReorder past ranges 0-6
	st := settledStats(t, s)
	if got := f.getsAt(obj.Key, 16*mib); got != 1 {
		t.Fatalf("the range past the window fetched %d times once the reader went past ranges 0-6, want once: their parts were not let go", got)
	}
	if st.ScheduleSkipped < 7 {
		t.Errorf("%d ranges dropped as passed, want at least 7", st.ScheduleSkipped)
	}
	for _, r := range ranges[last+1:] {
		read(r)
	}
	for i := 7; i < last; i++ {
		read(ranges[i])
	}
	st = settledStats(t, s)
	if st.ScheduleInUseBytes != 0 || st.ScheduleQueued != 0 {
		t.Errorf("after the last range: %d bytes held, %d ranges queued or kept", st.ScheduleInUseBytes, st.ScheduleQueued)
	}
	for _, r := range ranges[:7] {
		if got := f.getsAt(obj.Key, r.Off); got != 1 {
			t.Errorf("range at %d fetched %d times, want once", r.Off, got)
		}
	}
}

// A large sample comes in many reads (the kernel's 128 KiB requests): the
// part fetched for it stays until the last of them, so the sample costs
// one GET of its bytes, whatever order the reads come in.
func TestScheduledRangeReadInPiecesIsFetchedOnce(t *testing.T) {
	f := &fakeFetcher{}
	s := newTestEngine(t, DefaultConfig(), f, nil)
	obj := fakeObject("big-samples.tar", 64*mib)
	sample := Scheduled{Obj: obj, Off: 8 * mib, Len: 4 * mib}
	s.Schedule(1, []Scheduled{sample})
	settledStats(t, s)
	const piece = 128 * kib
	var offs []int64
	for off := sample.Off; off < sample.Off+sample.Len; off += piece {
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(15, 128)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	rd := s.OpenReader(obj, false, 0)
	defer rd.Close()
	buf := make([]byte, piece)
	for _, off := range offs {
		if n, _, err := rd.ReadAt(testContext(t), buf, off); err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, len(buf))) {
			t.Fatalf("read at %d: n=%d err=%v, or wrong bytes", off, n, err)
		}
	}
	st := settledStats(t, s)
	if g, asked := f.gets.Load(), f.askedBytes.Load(); g != 1 || asked != sample.Len {
		t.Errorf("a 4 MiB scheduled sample read in %d pieces: %d GETs of %d bytes, want 1 of %d", len(offs), g, asked, sample.Len)
	}
	if st.ScheduleInUseBytes != 0 || st.ScheduleRead != 1 {
		t.Errorf("after the sample: %d bytes still held, %d ranges read; want 0 and 1", st.ScheduleInUseBytes, st.ScheduleRead)
	}
}

// A schedule over a shard small next to the budget fetches the whole part
// each range lies in with the first range there, into the cache; with no
// cache to keep it, only the range's blocks.
func TestScheduleOfASmallShardFetchesWholeParts(t *testing.T) {
	cfg := DefaultConfig() // 8 MiB parts, 1 GiB budget: a 20 MiB shard is small
	obj := fakeObject("small.tar", 20*mib)
	ranges := []Scheduled{{Obj: obj, Off: 3*mib + 5, Len: 100 * kib}, {Obj: obj, Off: 5 * mib, Len: 100 * kib}}
	for _, tc := range []struct {
		name        string
		cache       bool
		gets, bytes int64
	}{{"with a cache", true, 1, 8 * mib}, {"without", false, 2, 2 * mib}} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{}
			var c Cache
			if tc.cache {
				c = newRingCache(t, cfg.BlockSize, 64*mib)
			}
			s := newTestEngine(t, cfg, f, c)
			s.Schedule(1, ranges)
			settledStats(t, s)
			if g, n := f.gets.Load(), f.askedBytes.Load(); g != tc.gets || n != tc.bytes {
				t.Errorf("%d GETs of %d bytes, want %d of %d", g, n, tc.gets, tc.bytes)
			}
		})
	}
}

// A schedule over blocks the cache holds: those in the RAM tier get no
// part (the reads find them there; a part would copy each block again for
// every range of it scheduled after the last part went), those only in the
// ring are read into parts: the ranges' own blocks, or for a shard small
// next to the budget the whole part each range lies in (into the RAM tier,
// as the density rule reads a ring-held object). Every read gets the
// right bytes, and the store is never asked.
func TestScheduleOverCachedBlocksCopiesOnlyWhatTheRAMTierLacks(t *testing.T) {
	obj := fakeObject("shard.tar", 20*mib)
	ranges := []Scheduled{{Obj: obj, Off: 3*mib + 5, Len: 100 * kib}, {Obj: obj, Off: 5 * mib, Len: 100 * kib}, {Obj: obj, Off: 12 * mib, Len: mib + 1}}
	for _, tc := range []struct {
		name       string
		budget     int64 // 1 GiB: the shard is small next to it; 64 MiB: it is not
		placement  cache.Placement
		parts      int64
		cacheBytes int64
	}{
		{"in the RAM tier", 64 * mib, cache.ForRandomRead, 0, 0},
		{"in the RAM tier, small shard", DefaultMemory, cache.ForRandomRead, 0, 0},
		{"in the ring only", 64 * mib, cache.ForReadAhead, 3, 4 * mib},                    // blocks 3, 5, 12-13
		{"in the ring only, small shard", DefaultMemory, cache.ForReadAhead, 2, 16 * mib}, // parts [0, 8) and [8, 16) MiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Memory = tc.budget
			f := &fakeFetcher{}
			c := newRingCache(t, cfg.BlockSize, 64*mib)
			c.Put(obj, 0, wantBytes(obj, 0, int(obj.Size)), tc.placement)
			s := newTestEngine(t, cfg, f, c)
			s.Schedule(1, ranges)
			st := settledStats(t, s)
			if st.ScheduleParts != tc.parts || st.CacheBytes != tc.cacheBytes {
				t.Errorf("%d parts made for the schedule, %d bytes copied from the cache into them; want %d and %d",
					st.ScheduleParts, st.CacheBytes, tc.parts, tc.cacheBytes)
			}
			for _, r := range ranges {
				rd := s.OpenReader(obj, false, 0)
				buf := make([]byte, r.Len)
				n, _, err := rd.ReadAt(testContext(t), buf, r.Off)
				rd.Close()
				if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, r.Off, len(buf))) {
					t.Fatalf("read at %d: n=%d err=%v, or wrong bytes", r.Off, n, err)
				}
			}
			if st := settledStats(t, s); st.ScheduleInUseBytes != 0 || st.ScheduleQueued != 0 {
				t.Errorf("after the reads: %d bytes held, %d ranges queued or kept", st.ScheduleInUseBytes, st.ScheduleQueued)
			}
			if g := f.gets.Load(); g != 0 {
				t.Errorf("%d GETs for blocks the cache held", g)
			}
		})
	}
}

// A schedule over shards small next to the budget fetches them into the
// cache and lets each part go as it arrives, as the density rule does: the
// window is the GETs in flight, not parts kept until every sample in them
// is read (held, the parts of a shuffled epoch filled the window for most
// of the epoch and the schedule stopped fetching). Here eight whole shards
// come in, twice the schedule's half of the budget, before any read.
func TestScheduleOfSmallShardsLetsPartsGoOnceCached(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = 64 * mib // the schedule's half: four 8 MiB parts; a shard of 8 MiB is small
	c := newRingCache(t, cfg.BlockSize, 128*mib)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	var ranges []Scheduled
	for i := range 8 {
		ranges = append(ranges, Scheduled{Obj: fakeObject(fmt.Sprintf("s%d.tar", i), 8*mib), Off: 5, Len: 100 * kib})
	}
	s.Schedule(1, ranges)
	st := settledStats(t, s)
	if asked := f.askedBytes.Load(); asked != 64*mib {
		t.Fatalf("the schedule fetched %d bytes before any read, want the eight shards' %d", asked, 64*mib)
	}
	if st.InUseBytes != 0 || st.ScheduleInUseBytes != 0 || st.ScheduleQueued != 0 || st.ScheduleParts != 8 {
		t.Errorf("after the shards arrived: %d bytes held, %d of them for the schedule, %d ranges queued or kept, %d parts; want 0, 0, 0, 8",
			st.InUseBytes, st.ScheduleInUseBytes, st.ScheduleQueued, st.ScheduleParts)
	}
	for _, r := range ranges {
		rd := s.OpenReader(r.Obj, false, 0)
		buf := make([]byte, r.Len)
		n, _, err := rd.ReadAt(testContext(t), buf, r.Off)
		rd.Close()
		if err != nil || !bytes.Equal(buf[:n], wantBytes(r.Obj, r.Off, len(buf))) {
			t.Fatalf("read %s at %d: n=%d err=%v, or wrong bytes", r.Obj.Key, r.Off, n, err)
		}
	}
	if g := f.gets.Load(); g != 8 {
		t.Errorf("%d GETs, want the 8 the schedule made: the reads find the shards in the cache", g)
	}
}

// A schedule runs at most half the GET slots (scheduleSlots): a read
// beside it starts its GET at once, and each GET that ends lets the
// schedule start its next part, whether or not a read came.
func TestScheduleLeavesHalfTheGETSlotsToReads(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Concurrency = 4
	release := make(chan struct{})
	big := fakeObject("big.tar", 1<<30) // large next to the budget: its parts keep their ranges
	f := &fakeFetcher{hold: release, holdIf: func(obj store.Object, _ int64) bool { return obj.Key == big.Key }}
	s := newTestEngine(t, cfg, f, nil)
	var ranges []Scheduled
	for i := range 6 {
		ranges = append(ranges, Scheduled{Obj: big, Off: int64(i) * 16 * mib, Len: 4 * kib})
	}
	s.Schedule(1, ranges)
	if n := s.Stats().Running; n != 2 {
		t.Fatalf("%d of %d GET slots taken by the schedule, want half", n, cfg.Concurrency)
	}
	other := fakeObject("other.tar", mib)
	rd := s.OpenReader(other, false, 0)
	buf := make([]byte, 4*kib)
	n, _, err := rd.ReadAt(testContext(t), buf, 5)
	rd.Close()
	if err != nil || !bytes.Equal(buf[:n], wantBytes(other, 5, len(buf))) {
		t.Fatalf("a read beside the schedule: n=%d err=%v, or wrong bytes", n, err)
	}
	close(release)
	// Every scheduled GET ran once the engine settled: each that ended
	// started the next.
	settledStats(t, s)
	for i := range int64(6) {
		if got := f.getsAt(big.Key, i*16*mib); got != 1 {
			t.Errorf("the scheduled range at %d MiB fetched %d times, want once", i*16, got)
		}
	}
	if g := f.gets.Load(); g != 7 {
		t.Errorf("%d GETs, want the schedule's 6 and the read's", g)
	}
}
