package prefetch

import (
	"time"
)

// A failed part is forgotten, so that a later read tries the store again.
// Tried again with the store's whole retry budget, though, the very next
// READ waits it out a second time: the kernel reads a page again itself
// when the read-ahead READ that covered it failed, and the READs of one
// read(2) queued behind a failing GET each make a part of their own, so
// one read(2) through a dead endpoint took two budgets or more before it
// failed. The part table remembers, per range, that it just failed: for
// failedRangeMemory a part over such a range is fetched with one attempt
// (store.WithOneAttempt), which fails at once while the store is still
// gone and succeeds once it is back, and no read-ahead, next-shard, dense
// or schedule part is made over it.

// failedRangeMemory is how long a failed range is remembered: long enough
// for the kernel's own re-read of the page and the READs queued behind the
// failed one, short enough that a reader who comes back later gets the
// store's whole retry budget again.
const failedRangeMemory = 2 * time.Second

// maxFailedRanges bounds the failed ranges remembered across all objects;
// past it the oldest are forgotten.
const maxFailedRanges = 256

// failedRange is a range whose GET failed at a time, with its error.
type failedRange struct {
	id  objectID
	r   Range
	err error
	at  time.Time
}

// failedRanges are the ranges that failed in the last failedRangeMemory,
// oldest first. Guarded by Engine.mu.
type failedRanges struct {
	list []failedRange
}

// add remembers that r of id failed with err now.
func (f *failedRanges) add(id objectID, r Range, err error, now time.Time) {
	f.expire(now)
	if len(f.list) >= maxFailedRanges {
		f.list = append(f.list[:0], f.list[1:]...)
	}
	f.list = append(f.list, failedRange{id: id, r: r, err: err, at: now})
}

// find returns the error of a range of id overlapping r that failed in the
// last failedRangeMemory, or nil.
func (f *failedRanges) find(id objectID, r Range, now time.Time) error {
	f.expire(now)
	for i := len(f.list) - 1; i >= 0; i-- {
		if e := f.list[i]; e.id == id && overlap(e.r, r) > 0 {
			return e.err
		}
	}
	return nil
}

// note records how a GET over r of id ended: a failure is remembered,
// unless the engine is closing (its GETs fail because it cancelled them),
// and a success forgets what failed there.
func (f *failedRanges) note(id objectID, r Range, err error, closing bool) {
	switch {
	case err == nil:
		f.forget(id, r)
	case !closing:
		f.add(id, r, err, time.Now())
	}
}

// forget drops what is remembered of r of id: a GET over it succeeded.
func (f *failedRanges) forget(id objectID, r Range) {
	if len(f.list) == 0 {
		return
	}
	kept := f.list[:0]
	for _, e := range f.list {
		if e.id != id || overlap(e.r, r) == 0 {
			kept = append(kept, e)
		}
	}
	clear(f.list[len(kept):])
	f.list = kept
}

// expire drops ranges remembered longer than failedRangeMemory.
func (f *failedRanges) expire(now time.Time) {
	n := 0
	for n < len(f.list) && now.Sub(f.list[n].at) >= failedRangeMemory {
		n++
	}
	if n > 0 {
		clear(f.list[:n])
		f.list = f.list[n:]
	}
}
