package runtime

import (
	"sync"
	"time"
)

// delayedStarts starts simulated processes StartLatency after StartContainer, with one goroutine
// for all of them. What it buys: a container stopped (TERM/KILL) before its start costs no
// simulation at all, and a node churning through pods faster than the latency wakes the
// goroutine about once per latency, not once per container, where a timer per container
// (time.AfterFunc, a Reset) would wake a scheduler thread for each (BenchmarkLifecycleInProcess
// and BenchmarkProcessSimulationCost, whose containers are stopped right after their status is
// read).
//
// No timer is armed while the goroutine already sleeps: every later start is due after the one
// it waits for, and it passes over the tasks stopped or used meanwhile without sleeping.
type delayedStarts struct {
	mu      sync.Mutex
	pending []*simTask // in start order
	running bool       // the goroutine runs (while any is pending)
}

// schedule has the goroutine start t at the given time.
func (q *delayedStarts) schedule(t *simTask, at time.Time) {
	t.startAt = at
	q.mu.Lock()
	q.pending = append(q.pending, t)
	run := !q.running
	q.running = true
	q.mu.Unlock()
	if run {
		go q.run()
	}
}

func (q *delayedStarts) run() {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.pending = nil
			q.mu.Unlock()
			return
		}
		next := q.pending[0]
		if next.settled.Load() {
			// Stopped before its start, or started by an exec or attach: nothing to do.
			q.pending[0] = nil
			q.pending = q.pending[1:]
			q.mu.Unlock()
			continue
		}
		if wait := time.Until(next.startAt); wait > 0 {
			q.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		q.pending[0] = nil
		q.pending = q.pending[1:]
		q.mu.Unlock()
		next.due() // at once when it was stopped or used meanwhile
	}
}
