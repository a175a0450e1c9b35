package prefetch

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/cache"
)

// readScheduled reads r through a handle of its own, as a map-style
// loader does a sample, and fails the test on an error or a wrong byte.
func readScheduled(t *testing.T, s *Engine, r Scheduled) {
	t.Helper()
	rd := s.OpenReader(r.Obj, false, 0)
	defer rd.Close()
	buf := make([]byte, r.Len)
	n, _, err := rd.ReadAt(testContext(t), buf, r.Off)
	if err != nil || int64(n) != r.Len || !bytes.Equal(buf[:n], wantBytes(r.Obj, r.Off, n)) {
		t.Fatalf("read %s at %d: n=%d err=%v, or wrong bytes", r.Obj.Key, r.Off, n, err)
	}
}

// The last samples of an epoch lie in blocks the RAM tier holds: the
// schedule gives them no part, and they are read from the cache after the
// last part went. They are still the schedule's: they do not turn the
// object dense. Once they are read the schedule is spent, and reads of the
// object that no schedule names are the density rule's again.
func TestScheduledSamplesTheRAMTierHoldsAreTheSchedulesUntilRead(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = 64 * mib // 32 MiB is not small next to it: dense once 8 blocks are touched
	c := newRingCache(t, cfg.BlockSize, 64*mib)
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, c)
	obj := fakeObject("epoch.tar", 32*mib)
	c.Put(obj, 0, wantBytes(obj, 0, int(8*mib)), cache.ForRandomRead) // blocks 0-7 in RAM
	ranges := []Scheduled{{Obj: obj, Off: 8*mib + 5, Len: 100 * kib}} // block 8: a part keeps it
	for i := range int64(8) {
		ranges = append(ranges, Scheduled{Obj: obj, Off: i*mib + 3*kib, Len: 100 * kib})
	}
	s.Schedule(1, ranges)
	if st := settledStats(t, s); st.ScheduleParts != 1 {
		t.Fatalf("%d parts made for the schedule, want 1 (block 8; the RAM tier holds the others)", st.ScheduleParts)
	}
	for _, r := range ranges {
		readScheduled(t, s, r)
	}
	st := settledStats(t, s)
	if st.DenseObjects != 0 {
		t.Errorf("%d objects turned dense by the schedule's own samples read from the cache", st.DenseObjects)
	}
	if g := f.gets.Load(); g != 1 {
		t.Errorf("%d GETs, want 1: the part of block 8", g)
	}
	if st.ScheduleInUseBytes != 0 || st.ScheduleQueued != 0 {
		t.Errorf("after the schedule: %d bytes held, %d ranges queued or kept", st.ScheduleInUseBytes, st.ScheduleQueued)
	}
	// Spent: eight random reads of other blocks are dense, as without a schedule.
	for i := range int64(8) {
		readScheduled(t, s, Scheduled{Obj: obj, Off: (16+i)*mib + 7, Len: kib})
	}
	if st := settledStats(t, s); st.DenseObjects != 1 {
		t.Errorf("%d objects dense after eight random reads past the spent schedule, want 1", st.DenseObjects)
	}
}

// A reader that gets to a sample while its range is still queued (the
// window full of parts kept for samples it has yet to read) reads it from
// what is there. The range is read: when the window moves on, the
// schedule neither fetches its block again nor keeps a part for it.
func TestScheduledSampleReadBeforeItsPartIsNotFetchedAgain(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = 16 * mib // a window of 8 one-block parts
	f := &fakeFetcher{}
	s := newTestEngine(t, cfg, f, nil)
	obj := fakeObject("big.tar", 1<<30) // large next to the budget: its parts keep their ranges
	var ranges []Scheduled
	for i := range int64(8) { // the window: blocks 0, 2, ... 14, a part each
		ranges = append(ranges, Scheduled{Obj: obj, Off: i*2*mib + 5, Len: 64 * kib})
	}
	past := Scheduled{Obj: obj, Off: 40 * mib, Len: 64 * kib}   // queued: the window is full
	early := Scheduled{Obj: obj, Off: 512 * kib, Len: 64 * kib} // queued behind it, in block 0
	ranges = append(ranges, past, early)
	s.Schedule(1, ranges)
	if st := settledStats(t, s); st.ScheduleParts != 8 {
		t.Fatalf("%d parts made for the schedule before any read, want the window's 8", st.ScheduleParts)
	}
	readScheduled(t, s, early) // a worker ahead of the others: served by block 0's part
	for _, r := range ranges[:9] {
		readScheduled(t, s, r)
	}
	st := settledStats(t, s)
	if g := f.getsAt(obj.Key, 0); g != 1 {
		t.Errorf("block 0, read for a sample before its range left the queue, fetched %d times, want once", g)
	}
	if st.ScheduleInUseBytes != 0 || st.ScheduleQueued != 0 || st.InUseBytes != 0 {
		t.Errorf("after every sample was read: %d bytes held for the schedule, %d in all, %d ranges queued or kept; want none",
			st.ScheduleInUseBytes, st.InUseBytes, st.ScheduleQueued)
	}
}

// A loader that stops reading must not keep its objects the schedule's
// for ever: once its owner has been idle scheduleHoldFor, the next
// schedule event drops the ranges no part keeps, and reads of the object
// are the density rule's again. The test runs in a synctest bubble: the
// engine's clock is the bubble's fake one, which moves only when the
// test sleeps.
func TestUnkeptRangesOfAnIdleOwnerAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Memory = 64 * mib
		c := newRingCache(t, cfg.BlockSize, 64*mib)
		s := newTestEngine(t, cfg, &fakeFetcher{}, c)
		obj := fakeObject("stopped.tar", 32*mib)
		c.Put(obj, 0, wantBytes(obj, 0, int(8*mib)), cache.ForRandomRead) // blocks 0-7 in RAM: no part
		var ranges []Scheduled
		for i := range int64(8) {
			ranges = append(ranges, Scheduled{Obj: obj, Off: i*mib + 3*kib, Len: 100 * kib})
		}
		s.Schedule(1, ranges)
		time.Sleep(scheduleHoldFor)
		s.Schedule(2, nil) // a schedule event while owner 1 is not yet idle that long: its ranges stay
		if st := s.Stats(); st.ScheduleSkipped != 0 {
			t.Fatalf("%d ranges of an owner idle for no longer than scheduleHoldFor dropped", st.ScheduleSkipped)
		}
		time.Sleep(time.Second)
		s.Schedule(2, nil) // the next event, owner 1 idle for longer than scheduleHoldFor
		st := settledStats(t, s)
		if st.ScheduleSkipped != int64(len(ranges)) {
			t.Errorf("%d ranges dropped, want the idle owner's %d", st.ScheduleSkipped, len(ranges))
		}
		for i := range int64(8) {
			readScheduled(t, s, Scheduled{Obj: obj, Off: (16+i)*mib + 7, Len: kib})
		}
		if st := settledStats(t, s); st.DenseObjects != 1 {
			t.Errorf("%d objects dense after eight random reads past an idle owner's schedule, want 1", st.DenseObjects)
		}
	})
}
