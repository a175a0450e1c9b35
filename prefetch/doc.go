// Package prefetch owns the read path below the FUSE layer: where each
// read's bytes come from, read-ahead, and the GETs.
//
// A Reader serves one open file (or one one-shot read of the GPU side
// interface) and answers every read from the source that source.go
// chooses, the one place that decides it: the RAM tier, the ring (one-shot
// reads), or a part of the handle's Stream, itself read from the ring or
// fetched from the store. It names the tier that served, for metrics.
//
// Read-ahead decides, per handle, whether reads are sequential or random
// (policy.go, a pure state machine), and the Engine fetches the byte
// ranges that decision asks for as parallel ranged GETs within one global
// memory budget shared fairly by every handle.
//
// A Stream serves one handle. Sequential reads get a window of parts in
// flight ahead of the reader that starts at one block and doubles up to
// Config.MaxPrefetch; random reads fetch only the blocks they touch. Parts
// are single-flight per block: two streams on one object share each GET.
// When the budget is full, reads wait (backpressure) and parts no read is
// using are dropped to make room, each kind's owner naming its own victim
// (budget.go): read-ahead a stream holds beyond its fair share first, then
// what was prefetched for objects nobody has open, then the loader's
// schedule, then any stream's read-ahead; nothing fails for lack of
// memory. Near the end of an object the window spills into the
// next objects of the listing order, and loader hints queue the starts of
// the objects named, so a handle opened next finds its first part fetched
// or in flight.
//
// The first byte comes first: while a read waits for its GET's first
// bytes, read-ahead of the same object waits too, and a read of only the
// first few KiB of a part gets a GET of just those (Config.HeadSize); the
// rest of the part and the read-ahead follow on the object's next read,
// so a reader that peeks at a file and closes it costs one small GET.
//
// A part whose blocks the ring holds is read from the ring instead of
// the Fetcher, so read-ahead over a warm stretch costs no GET and keeps the
// local disk as busy as the network. The next objects and hinted ones are
// read ahead from the ring the same way (not from the RAM tier, which
// serves them directly), so an open over a warm cache does not wait on the
// disk either. Every fetched part goes to the cache (Cache.Keep) as it
// arrives, except read-ahead while the cache lags the store
// (Config.SkipLaggingSink); once its readers have consumed it the part is
// freed, its buffer pooled unless the cache kept it as its RAM copy (a
// random reader's blocks). Cache, declared once, is every call this
// package makes on the cache; it never asks one by type assertion what
// else it can do, and with none (a nil Cache) fetched bytes only serve
// the reads waiting for them. This package never stores bytes beyond
// that, never talks to a backend except through Fetcher, and never knows
// about FUSE.
package prefetch
