// Package alarm rings many alarms, each at its own time, with one timer for all of them, for
// cri-fake/runtime's dormant processes (a finite sleep ends at its end).
package alarm

import (
	"sync"
	"time"
)

// Ringer is what a Set rings.
type Ringer interface {
	// Ring is called once the alarm's time has come, on the set's timer goroutine, with none of
	// the set's locks held.
	Ring()
	// AlarmSlot is where the set keeps the alarm's place (0: not in the set). Only the set
	// reads and writes it, under its lock.
	AlarmSlot() *int32
}

// Set rings each alarm at its time. What it buys: a node of 30,000 dormant `sleep 3600`
// containers holds one 32-byte entry each in one heap, not a time.Timer and a method value
// each (about 160 bytes: cri-fake/server's BenchmarkLargeNode). The zero Set is ready to use.
//
// Lock order: a caller may hold its own locks while it calls Add and Remove; Ring is called
// with none of the set's held.
type Set[T Ringer] struct {
	mu    sync.Mutex
	heap  []entry[T] // a binary min-heap by at
	timer *time.Timer
	armed time.Time // when the timer fires (zero: not armed)
}

type entry[T Ringer] struct {
	at time.Time
	r  T
}

// Add sets r's alarm to ring at at (moving it if it was set).
func (s *Set[T]) Add(r T, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := *r.AlarmSlot() - 1; i >= 0 {
		s.removeLocked(int(i))
	}
	s.heap = append(s.heap, entry[T]{at, r})
	s.up(len(s.heap) - 1)
	s.armLocked()
}

// Remove takes r's alarm out of the set; false when it was not in it (it rang, or was never set).
func (s *Set[T]) Remove(r T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := *r.AlarmSlot() - 1
	if i < 0 {
		return false
	}
	s.removeLocked(int(i))
	return true
}

// Len is the number of alarms set.
func (s *Set[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heap)
}

// armLocked has the timer fire at the earliest alarm, unless it fires before that already.
func (s *Set[T]) armLocked() {
	if len(s.heap) == 0 {
		return
	}
	at := s.heap[0].at
	if !s.armed.IsZero() && !s.armed.After(at) {
		return
	}
	s.armed = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), s.fire)
		return
	}
	s.timer.Reset(time.Until(at))
}

// fire rings the alarms that are due and arms the timer for the next.
func (s *Set[T]) fire() {
	s.mu.Lock()
	s.armed = time.Time{}
	now := time.Now()
	var due []T
	for len(s.heap) > 0 && !s.heap[0].at.After(now) {
		due = append(due, s.heap[0].r)
		s.removeLocked(0)
	}
	s.armLocked()
	s.mu.Unlock()
	for _, r := range due {
		r.Ring()
	}
}

func (s *Set[T]) removeLocked(i int) {
	*s.heap[i].r.AlarmSlot() = 0
	last := len(s.heap) - 1
	if i != last {
		s.heap[i] = s.heap[last]
		*s.heap[i].r.AlarmSlot() = int32(i + 1)
	}
	s.heap[last] = entry[T]{}
	s.heap = s.heap[:last]
	if i != last {
		s.down(i)
		s.up(i)
	}
	if len(s.heap) == 0 {
		s.heap = nil // a node that churned through many gives the array back
	}
}

func (s *Set[T]) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	*s.heap[i].r.AlarmSlot() = int32(i + 1)
	*s.heap[j].r.AlarmSlot() = int32(j + 1)
}

func (s *Set[T]) up(i int) {
	*s.heap[i].r.AlarmSlot() = int32(i + 1)
	for i > 0 {
		p := (i - 1) / 2
		if !s.heap[i].at.Before(s.heap[p].at) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Set[T]) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(s.heap) && s.heap[l].at.Before(s.heap[small].at) {
			small = l
		}
		if r := l + 1; r < len(s.heap) && s.heap[r].at.Before(s.heap[small].at) {
			small = r
		}
		if small == i {
			return
		}
		s.swap(i, small)
		i = small
	}
}
