package prefetch

import "github.com/shardfs/shardfs/cache"

// purpose is why a part exists. It is set by the producer that makes the
// part and changes only when a stream adopts a part prefetched for an
// object nobody had open (a next shard or a hinted one becomes the
// stream's window). Everything that depends on why a part exists asks its
// purpose: where its bytes go in the cache, whether it is kept until they
// are there, which budget class it is charged to, and whether it counts
// as read-ahead.
type purpose uint8

const (
	// forRandomRead: a random read waits on it, and the ring holds its
	// blocks; let go once the read is over.
	forRandomRead purpose = iota
	// forMissedRead: a random read waits on it and the cache could not
	// serve it. Kept until its GET is over and its bytes are in the
	// cache, whoever holds it: the reader, served from the bytes that
	// arrived first, goes on to other blocks, and the block's other
	// samples are read later, from the cache.
	forMissedRead
	// forStreamRead: a sequential reader's read waits on it.
	forStreamRead
	// forWindow: read ahead of a stream, within its window.
	forWindow
	// forNextShard: the start of an object the reader of another object
	// is expected to open next.
	forNextShard
	// forHint: the start of an object a loader hinted.
	forHint
	// forDenseRest: the rest of an object random reads use densely,
	// fetched in the background. Kept, whoever holds it, until its bytes
	// are in the cache: a reader that read its first block and went on
	// must not cancel the rest.
	forDenseRest
	// forSchedule: ranges of the loader's sample schedule; kept until a
	// read reaches each of them (part.sched).
	forSchedule
	// forScheduleWhole: a schedule's part over an object small next to
	// the budget, run on to the end of its PartSize part; kept until its
	// bytes are in the cache, keeping no range (widensLocked).
	forScheduleWhole
	// forChunk: a random read of an object larger than the cache and the
	// rest of its chunk, lent to the page cache as it arrives (exact.go);
	// no cache tier keeps it.
	forChunk
	numPurposes
)

var purposeNames = [...]string{"random read", "missed read", "stream read", "window", "next shard", "hint", "dense rest", "schedule", "schedule whole", "chunk"}

func (p purpose) String() string { return purposeNames[p] }

// placement is where the bytes a part fetched go in the cache: the ring
// alone for a stream's parts and the starts of objects to be streamed
// (their readers read them from the part, and the page cache keeps them);
// RAM and ring for random readers, who come back for single blocks, for a
// dense object's rest, whose reads are random, and for the schedule's
// parts, whose other samples in the same blocks come later.
func (p purpose) placement() cache.Placement {
	switch p {
	case forStreamRead, forWindow, forNextShard, forHint:
		return cache.ForReadAhead
	}
	return cache.ForRandomRead
}

// toCache reports whether the cache is offered the part's bytes: not a
// chunk's, which the page cache keeps (exact.go).
func (p purpose) toCache() bool { return p != forChunk }

// ringPlacement is what reading a part's blocks from the ring does with
// them: a dense object's rest and the schedule's parts are copied into
// RAM, where random reads look first; others stay in the part alone.
func (p purpose) ringPlacement() cache.Placement {
	switch p {
	case forDenseRest, forSchedule, forScheduleWhole:
		return cache.ForRandomRead
	}
	return cache.ForReadAhead
}

// keptUntilCached reports whether a part is kept, whoever holds it, until
// its GET is over and its bytes are in the cache.
func (p purpose) keptUntilCached() bool {
	return p == forMissedRead || p == forDenseRest || p == forScheduleWhole
}

// forRead reports whether the part was made for a read that waited on it,
// not fetched ahead of any read.
func (p purpose) forRead() bool {
	return p == forRandomRead || p == forMissedRead || p == forStreamRead || p == forChunk
}

// speculative reports whether the part was fetched for an object nobody
// has open: it is kept for the stream expected to open it, and is the
// first to go when a read needs room.
func (p purpose) speculative() bool { return p == forNextShard || p == forHint }

// scheduled reports whether the part was made for the loader's schedule.
func (p purpose) scheduled() bool { return p == forSchedule || p == forScheduleWhole }

// class is the budget class a part is charged to.
func (p purpose) class() budgetClass {
	switch p {
	case forRandomRead, forMissedRead, forStreamRead, forChunk:
		return classRead
	case forWindow:
		return classWindow
	case forNextShard, forHint:
		return classNext
	case forDenseRest:
		return classDense
	}
	return classSchedule
}

// budgetClass is what the budget is charged for. Each class but reads has
// a cap of its own (budget.go); a read that waits for room is served
// before any of them, and eviction asks the classes for a victim in
// order.
type budgetClass uint8

const (
	classRead     budgetClass = iota // a read waits on the part
	classWindow                      // a stream's read-ahead
	classNext                        // the starts of next shards and hinted objects
	classDense                       // a dense object's rest
	classSchedule                    // the loader's sample schedule
	numClasses
)

var classNames = [...]string{"read", "window", "next", "dense", "schedule"}

func (c budgetClass) String() string { return classNames[c] }
