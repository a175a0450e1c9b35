package prefetch

import "sync"

// arrival tracks how many leading bytes of a part's buffer its GET has
// filled for good, so a read can be served as soon as its own bytes are
// in rather than when the whole part is. It has its own lock: the GET
// reports every store.progressStep bytes and must not contend with
// Engine.mu for that.
type arrival struct {
	mu   sync.Mutex
	n    int64
	more chan struct{} // closed when n grows; nil while nobody waits
}

// set records that the first n bytes are final; it never moves back.
func (a *arrival) set(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n <= a.n {
		return
	}
	a.n = n
	if a.more != nil {
		close(a.more)
		a.more = nil
	}
}

// upTo returns nil when at least want bytes are final, or else a channel
// that is closed once more bytes are.
func (a *arrival) upTo(want int64) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n >= want {
		return nil
	}
	if a.more == nil {
		a.more = make(chan struct{})
	}
	return a.more
}

// final returns how many leading bytes are final.
func (a *arrival) final() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}
