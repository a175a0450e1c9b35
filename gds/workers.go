package gds

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
)

// The batch workers: a fixed pool owned by the Server, started by the first
// SUBMIT and stopped by Close. Each takes the next entry from the RAM queue
// first, then the ring queue, then the store queue.

// startWorkers starts the pool once.
func (s *Server) startWorkers() {
	s.startOnce.Do(func() {
		for range s.cfg.BatchWorkers {
			s.workers.Add(1)
			go s.worker()
		}
	})
}

func (s *Server) worker() {
	defer s.workers.Done()
	for {
		j, ok := s.nextJob()
		if !ok {
			return
		}
		s.serveJob(j)
	}
}

// nextJob returns the next entry, by residency, or false once the server
// is closed.
func (s *Server) nextJob() (*batchJob, bool) {
	select {
	case j := <-s.queues[ResidentRAM]:
		return j, true
	default:
	}
	select {
	case j := <-s.queues[ResidentRAM]:
		return j, true
	case j := <-s.queues[ResidentRing]:
		return j, true
	default:
	}
	select {
	case j := <-s.queues[ResidentRAM]:
		return j, true
	case j := <-s.queues[ResidentRing]:
		return j, true
	case j := <-s.queues[ResidentStore]:
		return j, true
	case <-s.quit:
		return nil, false
	}
}

// stopWorkers ends the pool and completes what was still queued (every
// handle is gone by then: the entries only give their bounds back).
func (s *Server) stopWorkers() {
	s.stopOnce.Do(func() { close(s.quit) })
	s.workers.Wait()
	for _, q := range s.queues {
		for {
			select {
			case j := <-q:
				s.serveJob(j)
				continue
			default:
			}
			break
		}
	}
}

// defaultBatchWorkers: copies out of the RAM tier scale with cores until
// memory bandwidth is spent; more workers than that only queue on it.
func defaultBatchWorkers() int { return min(max(runtime.GOMAXPROCS(0), 4), 32) }

// inFlight bounds the batch entries accepted but not yet completed, per
// handle, per uid and per mount, so no client (or user) can queue unbounded
// work or starve the others.
type inFlight struct {
	perHandle, perUID, perMount int

	mu     sync.Mutex
	mount  int
	byUID  map[uint32]int
	refuse uint64 // SUBMITs refused for a bound
}

// acquire takes n entries for st and uid, all or none.
func (f *inFlight) acquire(st *handleState, uid uint32, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var which string
	var limit int
	switch {
	case st.inFlight+n > f.perHandle:
		which, limit = "handle", f.perHandle
	case f.byUID[uid]+n > f.perUID:
		which, limit = "uid", f.perUID
	case f.mount+n > f.perMount:
		which, limit = "mount", f.perMount
	default:
		st.inFlight += n
		f.byUID[uid] += n
		f.mount += n
		return nil
	}
	f.refuse++
	return fmt.Errorf("%d more entries would pass the %s's bound of %d in flight: %w", n, which, limit, syscall.EAGAIN)
}

func (f *inFlight) release(st *handleState, uid uint32, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.inFlight -= n
	f.mount -= n
	if f.byUID[uid] -= n; f.byUID[uid] == 0 {
		delete(f.byUID, uid)
	}
}

// stats returns the entries in flight on the mount and the SUBMITs a
// bound turned away.
func (f *inFlight) stats() (int, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mount, f.refuse
}
