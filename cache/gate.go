package cache

import "sync"

// gate admits the cache's operations until Close shuts it. An operation
// holds it shared for as long as it uses the tiers; shut waits for those
// in flight and holds it exclusively while the tiers are closed, so the
// ring file is never closed under a reader.
type gate struct {
	mu     sync.RWMutex
	closed bool
}

// enter admits one operation; it fails once Close has begun. An operation
// admitted calls leave when done.
func (g *gate) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *gate) leave() { g.mu.RUnlock() }

// shut waits for the operations in flight, then runs fn with none
// admitted; no operation is admitted after it. fn runs once: a later shut
// does nothing.
func (g *gate) shut(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	fn()
}
