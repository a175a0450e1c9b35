package prefetch

import (
	"slices"
	"strings"

	"github.com/shardfs/shardfs/store"
)

// nextShards prefetches the starts of objects nobody has open yet: those
// a stream's reader is expected to open next (its spill: by its opener's
// stride, openers.go, or else the listing order) and those a loader
// hinted. It owns the listing order and when each key was last opened,
// the openers' histories, the hints still to prefetch, and the parts it
// made until a stream adopts them: the first to go when a read needs
// room, newest first. Its parts take at most half the budget (fits).
// Guarded by Engine.mu.
type nextShards struct {
	maker
	order    []store.Object // the listing, sorted by key (indexOf)
	openedAt []uint64       // by index in order: opens when it was last opened, 0 never
	opens    uint64         // streams opened so far
	openers  openers        // the order each opener takes objects in (openers.go)
	hints    []store.Object // hinted objects not yet prefetched, in order
	spec     []*part        // parts made for objects not yet open, oldest first
	stats    NextStats
	// guessWhole is told of an object whose first part a guess makes:
	// its reader is expected to read it whole (cacheTells.guessLocked).
	guessWhole func(o *object)
}

// closeLocked drops the hints still queued: the engine closed.
func (n *nextShards) closeLocked() { n.hints = nil }

// fits reports whether a part of size bytes may be made for objects not
// open: together they take at most half the budget, so that open streams
// keep the rest, and none is made while a read waits for room.
func (n *nextShards) fits(size int64) bool {
	return n.budget.classFits(classNext, size, n.cfg.Memory/2)
}

// setOrderLocked takes objs, sorted by key, as the listing order, keeping
// when each key still listed was last opened (Engine.SetOrder).
func (n *nextShards) setOrderLocked(objs []store.Object) {
	openedAt := make([]uint64, len(objs))
	for j, o := range objs {
		if i, ok := n.indexOf(o.Key); ok {
			openedAt[j] = n.openedAt[i]
		}
	}
	n.order, n.openedAt = objs, openedAt
}

// indexOf finds key in the listing order.
func (n *nextShards) indexOf(key string) (int, bool) {
	return slices.BinarySearchFunc(n.order, key, func(o store.Object, k string) int { return strings.Compare(o.Key, k) })
}

// openedLocked records that opener opened key while open other streams
// were open, and returns the stream's since (Stream.since): the opens
// before it, less one for each of those streams.
func (n *nextShards) openedLocked(key string, opener Opener, open int) (since uint64) {
	n.opens++
	if i, ok := n.indexOf(key); ok {
		n.openedAt[i] = n.opens
		if n.openers.opened(opener, i) {
			n.stats.NextMissed++
		}
	}
	return n.opens - 1 - uint64(open)
}

// foundLocked reports whether a stream opening o finds its first part
// prefetched as a next shard or a hint, and counts it.
func (n *nextShards) foundLocked(o *object) bool {
	first := n.parts.partAt(o, 0)
	if first == nil || !first.why.speculative() {
		return false
	}
	if first.why == forNextShard {
		n.stats.NextFound++
	} else {
		n.stats.HintFound++
	}
	return true
}

// maxQueuedHints bounds the hint schedule; hints past it are dropped.
const maxQueuedHints = 4096

// hintLocked queues objs after the hints still queued, up to
// maxQueuedHints, and reports how many it dropped past that.
func (n *nextShards) hintLocked(objs []store.Object) (dropped int) {
	room := maxQueuedHints - len(n.hints)
	if len(objs) > room {
		dropped = len(objs) - room
		objs = objs[:max(room, 0)]
	}
	n.hints = append(n.hints, objs...)
	n.pumpHintsLocked()
	return dropped
}

// pumpHintsLocked prefetches the first part of hinted objects, in order,
// while the budget allows.
func (n *nextShards) pumpHintsLocked() {
	for len(n.hints) > 0 && !n.closed() {
		obj := n.hints[0]
		if !n.prefetchStartLocked(obj, min(n.cfg.PartSize, obj.Size), forHint, n.fits) {
			return
		}
		n.hints[0] = store.Object{}
		n.hints = n.hints[1:]
	}
}

// spillLocked prefetches the start of the objects after st's in listing
// order: the part of st's window that reaches past its end, and at least
// the first part of each of the next NextShards objects. It is st's
// read-ahead carried on, so the engine's afford draws on st's share as its
// window shrinks. open is how many streams are open, st's included.
//
// Objects another reader opened after st's was opened, or just before it
// while st's fellow readers were opening theirs (st.since; open now or
// already read), objects open since before, and objects whose start
// another stream's spill has claimed are passed over without counting:
// when several readers split a listing (DataLoader workers each take every
// W-th shard), the next object is another reader's, and the one st's
// reader opens next lies past those. Four readers taking shards from one
// queue open them in any order; counting only opens after st's, a shard
// read and closed by the reader that opened it first was fetched a second
// time, whole, by the spill of the one opened after it. Objects opened
// before that only (in an earlier epoch) are prefetched again.
func (n *nextShards) spillLocked(st *Stream, spill int64, open int, afford func(size int64) bool) {
	i, ok := n.indexOf(st.obj.Key)
	if !ok || n.cfg.NextShards <= 0 {
		return
	}
	if j, ok := n.openers.next(st.opener, i); ok {
		if j >= 0 {
			n.spillByStrideLocked(st, i, j-i, spill, afford)
		}
		return
	}
	// What can be passed over: objects opened since st, plus those that
	// other streams hold open or claimed.
	passes := int(n.opens-st.since) + open*(n.cfg.NextShards+1)
	for j, taken := i+1, 0; j < len(n.order) && taken < n.cfg.NextShards; j++ {
		next := n.order[j]
		o := n.parts.find(next)
		if n.openedAt[j] > st.since || (o != nil && (o.streams > 0 || (o.claimedBy != nil && o.claimedBy != st))) {
			if passes--; passes < 0 {
				return
			}
			continue
		}
		n.parts.object(next).claimedBy = st
		// Whole parts, as for the window itself.
		n.prefetchStartLocked(next, min(ceilTo(max(spill, 1), n.cfg.PartSize), next.Size), forNextShard, afford)
		spill = max(spill-next.Size, 0)
		taken++
	}
}

// spillByStrideLocked is spillLocked for a stream whose opener's history
// gives the stride between its opens (openers.go): the objects at i plus
// one, two, … NextShards strides. Objects open already are left to their
// streams, and objects another stream's spill claimed to it.
func (n *nextShards) spillByStrideLocked(st *Stream, i, stride int, spill int64, afford func(size int64) bool) {
	for k := 1; k <= n.cfg.NextShards; k++ {
		j := i + k*stride
		if j < 0 || j >= len(n.order) {
			return
		}
		next := n.order[j]
		if k == 1 {
			n.openers.guessed(st.opener, j)
		}
		o := n.parts.find(next)
		if o == nil || o.streams == 0 && (o.claimedBy == nil || o.claimedBy == st) {
			n.parts.object(next).claimedBy = st
			n.prefetchStartLocked(next, min(ceilTo(max(spill, 1), n.cfg.PartSize), next.Size), forNextShard, afford)
		}
		spill = max(spill-next.Size, 0)
	}
}

// prefetchStartLocked has the first want bytes of obj fetched or in flight
// for a stream yet to open it, as far as afford allows, and reports whether
// all of it is. Objects already open are left to their streams.
func (n *nextShards) prefetchStartLocked(obj store.Object, want int64, why purpose, afford func(size int64) bool) bool {
	o := n.parts.object(obj)
	defer n.parts.tidy(o)
	if o.streams > 0 {
		return true
	}
	want = min(ceilTo(want, n.cfg.BlockSize), obj.Size)
	for pos := int64(0); pos < want; {
		if p := n.parts.partAt(o, pos); p != nil {
			pos = p.end
			continue
		}
		// A run in the RAM tier is served from there; a run in the ring is
		// read ahead from disk like one fetched, so that an open finds its
		// first bytes in memory rather than waiting on the disk.
		gap, cached := n.source(o, pos, want, true)
		if gap.Empty() {
			pos += n.cfg.BlockSize
			continue
		}
		if !afford(n.cfg.chargeOf(gap)) {
			return false
		}
		if gap.Start == 0 && n.guessWhole != nil {
			n.guessWhole(o)
		}
		n.spec = append(n.spec, n.newPart(o, gap, Range{}, cached, why))
		if why == forNextShard {
			n.stats.NextParts++
		} else {
			n.stats.HintParts++
		}
		pos = gap.End
	}
	return true
}

// unspecLocked makes p, if it is one of the parts made for an object not
// yet open, the read-ahead of the stream that now holds it, or plain
// read-ahead being removed: it is no longer this producer's, and its
// charge moves to the window's class.
func (n *nextShards) unspecLocked(p *part) {
	if !p.why.speculative() {
		return
	}
	n.budget.charge(p.why.class(), -p.size)
	p.why = forWindow
	n.budget.charge(p.why.class(), p.size)
	if i := slices.Index(n.spec, p); i >= 0 {
		n.spec = slices.Delete(n.spec, i, i+1)
	}
}

// victimLocked is the part to evict among those made for objects not yet
// open: the newest no read is using, the guess furthest from being opened.
// nil when none.
func (n *nextShards) victimLocked() *part {
	for i := len(n.spec) - 1; i >= 0; i-- {
		if p := n.spec[i]; p.pins == 0 {
			return p
		}
	}
	return nil
}
