package prefetch

import (
	"slices"
	"time"

	"github.com/shardfs/shardfs/store"
)

// Reads of a schedule's ranges that no part keeps. A part keeps the
// ranges it covers until reads reach them (consumeLocked); two
// kinds of range have no part to do that:
//
//   - Unkept: a range placed where the RAM tier held its blocks, or whose
//     part goes to the cache whole (widensLocked). It waits in its owner's
//     unkept list until a read reaches it. Dropped at placement, it would
//     no longer count as the schedule's: the schedule would look spent
//     once its last part went while the reader still had samples to read
//     from the cache, and those would turn their objects dense at the end
//     of an epoch.
//   - Overtaken: a range still queued when the reader got to it (the
//     window full of parts kept for later samples), whose read was served
//     from what was there. A part made for it afterwards would keep it for
//     a read already done, and fetch its bytes again: held until the
//     reader is scheduleReorder ranges past, which the end of an epoch
//     never is.
//
// Every read of an object the schedule names looks for such ranges near
// the heads of each owner's queue and unkept list, where an in-order
// reader finds them (readLocked); the ranges it reaches the last
// unread bytes of are read, as those of a part are.

// unkeptRef is a placed range no part keeps.
type unkeptRef struct {
	obj store.Object
	ref schedRef
}

// scheduleReadScan bounds the ranges one read looks at in each owner's
// queue and unkept list, from the head: the reader reads near both heads,
// out of order by up to scheduleReorder either way. Ranges from
// readHorizon on are not looked at either: a reader in order, give or take
// scheduleReorder, is not there yet.
const scheduleReadScan = 2 * scheduleReorder

// readHorizon is the seq of q's first range a read now is taken not to be
// of: scheduleReorder past the newest range read.
func (q *scheduleQueue) readHorizon() uint64 { return q.readTo + scheduleReorder }

// readLocked records a read of r of obj against the ranges of
// every owner that no part keeps.
func (sc *schedule) readLocked(obj store.Object, r Range) {
	id := objectID{obj.Key, obj.ETag}
	if r.Empty() || sc.objects[id] == 0 {
		return
	}
	passed := false
	var owners []uint64
	for owner, q := range sc.owners {
		p1, read1 := sc.readQueuedLocked(owner, q, id, r)
		p2, read2 := sc.readUnkeptLocked(q, id, r)
		passed = passed || p1 || p2
		if read1 || read2 {
			owners = append(owners, owner)
		}
	}
	if passed {
		sc.moved++
		sc.pumpLocked()
	}
	for _, owner := range owners {
		sc.forgetOwnerLocked(owner)
	}
}

// readRefsLocked has r read refs of obj, and returns those it did not
// read whole; the others count as read.
func (sc *schedule) readRefsLocked(q *scheduleQueue, obj store.Object, refs []schedRef, r Range) (left []schedRef, passed bool) {
	left = refs[:0]
	for _, ref := range refs {
		if ref.left -= overlap(ref.r, r); ref.left > 0 {
			left = append(left, ref)
			continue
		}
		passed = sc.rangeReadLocked(q, obj, ref) || passed
	}
	clear(refs[len(left):])
	return left, passed
}

// readQueuedLocked has r read the queued ranges of owner's queue q that it
// overlaps, and drops those read whole from their entries: parts made for
// them later would keep them for a read that is over. An entry whose parts
// are still to be made shrinks to the blocks of the ranges left.
func (sc *schedule) readQueuedLocked(owner uint64, q *scheduleQueue, id objectID, r Range) (passed, read bool) {
	horizon := q.readHorizon()
	for i, seen := 0, 0; i < len(q.entries) && seen < scheduleReadScan && q.entries[i].refs[0].seq < horizon; i++ {
		e := &q.entries[i]
		seen += len(e.refs)
		if (objectID{e.obj.Key, e.obj.ETag}) != id || overlap(e.span, r) == 0 {
			continue
		}
		n := len(e.refs)
		var p bool
		e.refs, p = sc.readRefsLocked(q, e.obj, e.refs, r)
		passed = passed || p
		if len(e.refs) == n {
			continue
		}
		read = true
		if len(e.refs) == 0 {
			q.entries = slices.Delete(q.entries, i, i+1)
			sc.queued--
			i--
			continue
		}
		if !e.started {
			e.span = blocksOf(e.refs[0].r, sc.cfg.BlockSize)
			for _, ref := range e.refs[1:] {
				b := blocksOf(ref.r, sc.cfg.BlockSize)
				e.span = Range{min(e.span.Start, b.Start), max(e.span.End, b.End)}
			}
			e.next = e.span.Start
		}
	}
	if read && len(q.entries) == 0 {
		sc.turn = slices.DeleteFunc(sc.turn, func(o uint64) bool { return o == owner })
	}
	return passed, read
}

// readUnkeptLocked has r read the unkept ranges of q that it overlaps.
func (sc *schedule) readUnkeptLocked(q *scheduleQueue, id objectID, r Range) (passed, read bool) {
	horizon, k := q.readHorizon(), 0
	for k < min(len(q.unkept), scheduleReadScan) && q.unkept[k].ref.seq < horizon {
		k++
	}
	head := q.unkept[:0]
	for _, u := range q.unkept[:k] {
		if (objectID{u.obj.Key, u.obj.ETag}) == id {
			if u.ref.left -= overlap(u.ref.r, r); u.ref.left <= 0 {
				passed = sc.rangeReadLocked(q, u.obj, u.ref) || passed
				read = true
				sc.unkept--
				continue
			}
		}
		head = append(head, u)
	}
	if read {
		n := len(q.unkept)
		q.unkept = append(head, q.unkept[k:]...)
		clear(q.unkept[len(q.unkept):n])
	}
	return passed, read
}

// rangeReadLocked counts ref, of obj, read: it is no longer queued or
// kept, and its owner has read that far. It reports whether that moved
// the owner on.
func (sc *schedule) rangeReadLocked(q *scheduleQueue, obj store.Object, ref schedRef) bool {
	sc.countRangesLocked(obj, -1)
	if ref.seq < q.readTo {
		return false
	}
	q.readTo, q.active = ref.seq+1, time.Now()
	return true
}

// leaveUnkeptLocked puts the ranges of e, just placed, that no part was
// given to keep in q's unkept list, where reads reach them.
func (sc *schedule) leaveUnkeptLocked(q *scheduleQueue, e *schedEntry) {
	for _, ref := range e.refs {
		if !ref.kept {
			q.unkept = append(q.unkept, unkeptRef{obj: e.obj, ref: ref})
			sc.unkept++
			sc.countRangesLocked(e.obj, 1)
		}
	}
}

// dropUnkeptLocked drops from q's unkept list the ranges its owner has
// read past, or all of them when the owner has been idle scheduleHoldFor:
// a loader that stopped must not keep its objects named for ever. It
// reports whether it dropped any.
func (sc *schedule) dropUnkeptLocked(q *scheduleQueue, now time.Time) bool {
	n := 0
	idle := now.Sub(q.active) > scheduleHoldFor
	for n < len(q.unkept) && (idle || q.passed(q.unkept[n].ref)) {
		sc.countRangesLocked(q.unkept[n].obj, -1)
		n++
	}
	sc.stats.ScheduleSkipped += int64(n)
	sc.unkept -= n
	q.unkept = slices.Delete(q.unkept, 0, n)
	return n > 0
}
