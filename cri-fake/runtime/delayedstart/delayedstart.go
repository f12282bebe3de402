// Package delayedstart starts cri-fake/runtime's simulated processes StartLatency after
// StartContainer, with one goroutine for all of them.
package delayedstart

import (
	"sync"
	"time"
)

// Startable is what the queue starts: a task whose start may have been taken meanwhile.
type Startable interface {
	// Settled tells that the start was taken already (stopped before it, or started by an exec
	// or attach): the queue passes over it.
	Settled() bool
	// Due is called once its time has come.
	Due()
}

// Queue starts tasks at their time. What it buys: a container stopped (TERM/KILL) before its
// start costs no simulation at all, and a node churning through pods faster than the latency
// wakes the goroutine about once per latency, not once per container, where a timer per
// container (time.AfterFunc, a Reset) would wake a scheduler thread for each
// (BenchmarkLifecycleInProcess and BenchmarkProcessSimulationCost in cri-fake/server, whose
// containers are stopped right after their status is read).
//
// No timer is armed while the goroutine already sleeps: every later start is due after the one
// it waits for (Schedule is called with times in order: a fixed latency after now), and it passes
// over the tasks settled meanwhile without sleeping. The zero Queue is ready to use.
type Queue[T Startable] struct {
	mu      sync.Mutex
	pending []pending[T] // in start order
	running bool         // the goroutine runs (while any is pending)
}

// pending is a task and when it starts (kept here, not in the task, which outlives its start).
type pending[T Startable] struct {
	t  T
	at time.Time
}

// Schedule has the goroutine start t at the given time.
func (q *Queue[T]) Schedule(t T, at time.Time) {
	q.mu.Lock()
	q.pending = append(q.pending, pending[T]{t, at})
	run := !q.running
	q.running = true
	q.mu.Unlock()
	if run {
		go q.run()
	}
}

func (q *Queue[T]) run() {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.pending = nil
			q.mu.Unlock()
			return
		}
		next := q.pending[0]
		if next.t.Settled() {
			q.pending[0] = pending[T]{}
			q.pending = q.pending[1:]
			q.mu.Unlock()
			continue
		}
		if wait := time.Until(next.at); wait > 0 {
			q.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		q.pending[0] = pending[T]{}
		q.pending = q.pending[1:]
		q.mu.Unlock()
		next.t.Due() // at once when it was stopped or used meanwhile
	}
}
