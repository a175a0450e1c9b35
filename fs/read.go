package fs

import (
	"context"

	"github.com/shardfs/shardfs/store"
)

// ReadPath is everything below the FUSE layer that a read reaches. It
// decides where each read's bytes come from (RAM tier, ring, a part in
// flight, the store: prefetch/source.go) and names the tier that served
// them; this package never does. prefetch.Engine satisfies it through
// the command's wiring.
type ReadPath interface {
	// OpenReader returns the reader of one open of obj by opener (the
	// pid of the FUSE request that opened it; 0 when unknown): read-ahead
	// of the next shard follows the order each opener takes them in.
	// oneShot is for reads with no page cache behind them and no later
	// read to prepare for: the GPU interface's READ.
	OpenReader(obj store.Object, oneShot bool, opener uint32) Reader
	// Hint takes the loader's schedule: objects it will open next.
	Hint(objs ...store.Object)
	// Schedule takes the byte ranges owner (the writing process) will
	// read next, in order; each lies inside its object.
	Schedule(owner uint64, ranges []ScheduledRange) ScheduleResult
}

// ScheduledRange is one range of a loader's schedule: [Off, Off+Len) of Obj.
type ScheduledRange struct {
	Obj      store.Object
	Off, Len int64
}

// ScheduleResult is what the read path did not take of a schedule, for the
// hints counters: ranges overlapping the writer's previous one (only their
// new bytes are kept) and ranges refused by a full schedule, with the
// index of the first of each in the ranges given (-1 when none), an
// example for the log.
type ScheduleResult struct {
	Overlapping, Full           int
	FirstOverlapping, FirstFull int
}

// Reader reads one open file. Its reads may run concurrently.
type Reader interface {
	// Read answers len(p) bytes at off with io.ReaderAt's semantics
	// (short only at the end of the object, with io.EOF). data is p[:n]
	// or bytes the read path lends, released by a non-nil release, which
	// the caller calls exactly once, also when err is not nil. tier names
	// where the bytes came from, for Options.ObserveRead.
	Read(ctx context.Context, p []byte, off int64) (data []byte, tier string, release func(), err error)
	// ReadAt is Read into p, lent bytes copied and released.
	ReadAt(ctx context.Context, p []byte, off int64) (n int, tier string, err error)
	// Close lets go of what the reader holds (read-ahead, a kept block).
	Close()
}

// reply is a Reader's answer as the FUSE reply is written from it: data is
// p[:n], or lent bytes (a cache block, never written again, so nothing to
// release; or a pinned prefetch part, released once the reply is written).
type reply struct {
	data    []byte
	release func() // nil when there is nothing to release
}

// done releases the reply's bytes; it is called exactly once per reply.
func (r reply) done() {
	if r.release != nil {
		r.release()
	}
}
