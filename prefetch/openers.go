package prefetch

// Next-shard read-ahead guesses which object a reader opens after the one
// it is streaming. Readers that split a listing do not take it in order:
// DataLoader worker w of W opens shards w, w+W, w+2W, … of its list, so
// the object after the current one in the listing is another worker's.
// Each opener (the process, or thread, whose open reached the mount: the
// caller's pid in the FUSE request) has a history here: the listing index
// of the object it opened last and the stride between its last two opens.
// With a history, the guess is the current object's index plus the
// stride; without one (an opener's first object, or an unknown opener),
// the listing order is followed (nextShards.spillLocked). An opener whose
// last guesses were not what it opened next gets none until its stride
// would have been right again: guesses nobody uses cost a GET and budget
// each. The histories are nextShards' (nextshards.go).

// Opener names the process (or thread) that opened an object, as the FUSE
// request gives it; 0 when unknown.
type Opener uint32

// maxOpeners bounds the histories kept; past it they start afresh (a
// training job has a few loader workers per accelerator).
const maxOpeners = 4096

// missesToMute is how many guesses in a row an opener may leave unused
// before it gets no more.
const missesToMute = 2

// openerHistory is what one opener's opens say of its order.
type openerHistory struct {
	opens  int // objects of the listing it opened
	last   int // listing index of the object it opened last
	stride int // last minus the index opened before it; set from the second open on
	guess  int // the index guessed for its next open; -1 when none
	misses int // guesses in a row it did not open next
}

// openers is the history of every opener. Guarded by Engine.mu.
type openers struct {
	byID map[Opener]*openerHistory
}

// opened records that id opened the object at listing index i, and
// reports whether the opener's previous guess named another object.
func (o *openers) opened(id Opener, i int) (missed bool) {
	if id == 0 {
		return false
	}
	if o.byID == nil || len(o.byID) >= maxOpeners {
		o.byID = map[Opener]*openerHistory{}
	}
	h := o.byID[id]
	if h == nil {
		h = &openerHistory{guess: -1}
		o.byID[id] = h
	}
	if h.guess >= 0 {
		if h.guess == i {
			h.misses = 0
		} else {
			h.misses++
			missed = true
		}
		h.guess = -1
	}
	if h.opens > 0 {
		stride := i - h.last
		if stride == h.stride && stride != 0 {
			// The stride would have named this object: an opener muted
			// for its misses gets guesses again.
			h.misses = 0
		}
		h.stride = stride
	}
	h.last = i
	h.opens++
	return missed
}

// next returns the listing index to guess for id's next open after the
// object at index i, and whether the opener's history says anything: with
// no history (an unknown opener, or one that has opened one object) the
// listing order is followed. ok with j < 0 means the history says not to
// guess: the opener's guesses go unused, or it opened one object twice.
func (o *openers) next(id Opener, i int) (j int, ok bool) {
	h := o.byID[id]
	if id == 0 || h == nil || h.opens < 2 {
		return 0, false
	}
	if h.misses >= missesToMute || h.stride == 0 {
		return -1, true
	}
	return i + h.stride, true
}

// guessed records that id's next open was guessed to be index j.
func (o *openers) guessed(id Opener, j int) {
	if h := o.byID[id]; h != nil && h.guess < 0 {
		h.guess = j
	}
}
