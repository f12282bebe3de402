// Package trace records the calls that cross a plugin interface boundary (CRI, CNI, CSI and the
// kubelet's plugin registration) as one event format that every fake writes and the harness reads.
//
// A Recorder keeps the newest events in a bounded in-memory ring and, optionally, appends each one as
// a JSON line to a file. cni-fake, which lives only as long as one CNI invocation, appends to the same
// kind of file, so the harness can merge the three fakes' files by time into one boundary trace.
package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/plugsim/plugsim/harness/trace/event"
)

// Interface names used in Event.Interface.
const (
	CRI = event.CRI
	CNI = event.CNI
	CSI = event.CSI
	// Registration is the kubelet's plugin registration API (pluginregistration.v1).
	Registration = event.Registration
)

// Event is one call across an interface boundary (see package event, which holds the format so
// that the cni-fake binary can write it without linking gRPC).
type Event = event.Event

// Options configure a Recorder.
type Options struct {
	// Capacity bounds the in-memory ring; 0 means DefaultCapacity, a negative value keeps nothing in
	// memory (events still go to the file).
	Capacity int
	// File, when set, receives every event as a JSON line (appended; created 0644).
	File string
}

// DefaultCapacity is the ring size when Options.Capacity is 0.
const DefaultCapacity = 4096

// Recorder is a bounded, concurrency-safe event log. The zero value is not usable; use New.
type Recorder struct {
	mu    sync.Mutex
	ring  []slot
	next  int // index of the slot the next event goes to
	full  bool
	seq   uint64
	file  *os.File
	w     *bufio.Writer
	subs  map[chan Event]struct{}
	close sync.Once
}

// New returns a Recorder. It fails only when the trace file cannot be opened.
func New(opts Options) (*Recorder, error) {
	capacity := opts.Capacity
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	if capacity < 0 {
		capacity = 0
	}
	r := &Recorder{ring: make([]slot, capacity), subs: map[chan Event]struct{}{}}
	if opts.File != "" {
		f, err := os.OpenFile(opts.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open trace file: %w", err)
		}
		r.file, r.w = f, bufio.NewWriter(f)
	}
	return r, nil
}

// slot is one entry of the ring. A call served through the gRPC interceptors is kept as the
// interceptor saw it (call) and becomes an Event only when somebody reads the ring: recording a
// call then allocates nothing and writes two cache lines, where a whole Event is four. What was
// recorded as an Event, or has been read once, is kept as ev.
type slot struct {
	call call
	ev   *Event
}

// Record stores an event, giving it the next sequence number. Time defaults to now minus the
// duration (the moment the call started).
func (r *Recorder) Record(ev Event) {
	if r == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().Add(-ev.Duration())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	ev.Seq = r.seq
	if r.w != nil || len(r.subs) > 0 {
		ev = r.publishLocked(ev)
	}
	if len(r.ring) == 0 {
		return
	}
	r.storeLocked(slot{ev: &ev})
}

// recordCall stores a served gRPC call; it is Record for the interceptors' hot path.
func (r *Recorder) recordCall(c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	c.seq = r.seq
	if r.w != nil || len(r.subs) > 0 {
		ev := r.publishLocked(c.event())
		if len(r.ring) > 0 {
			r.storeLocked(slot{ev: &ev})
		}
		return
	}
	if len(r.ring) > 0 {
		r.storeLocked(slot{call: c})
	}
}

func (r *Recorder) storeLocked(s slot) {
	r.ring[r.next] = s
	r.next++
	if r.next == len(r.ring) {
		r.next, r.full = 0, true
	}
}

// eventLocked returns the event in a used slot, turning a call into its event once.
func (s *slot) eventLocked() Event {
	if s.ev == nil {
		ev := s.call.event()
		s.ev, s.call = &ev, call{}
	}
	s.ev.Render() // in place, so the next reader does not render again
	return *s.ev
}

// publishLocked renders ev and hands it to the trace file and the subscribers; it returns the
// rendered event. It is apart from Record so that only this path moves the event to the heap
// (json.Marshal takes its address): recording into the ring alone allocates nothing.
func (r *Recorder) publishLocked(ev Event) Event {
	ev.Render()
	if r.w != nil {
		// One JSON line per event, flushed at once, so a reader of the file (the harness, a
		// `tail -f`) sees each call as soon as it has finished.
		if b, err := json.Marshal(&ev); err == nil {
			r.w.Write(b)
			r.w.WriteByte('\n')
			r.w.Flush()
		}
	}
	for ch := range r.subs {
		select {
		case ch <- ev:
		default: // a slow subscriber misses events rather than stalling the server
		}
	}
	return ev
}

// Events returns the events in the ring, oldest first, rendered.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	if r.full {
		for i := r.next; i < len(r.ring); i++ {
			out = append(out, r.ring[i].eventLocked())
		}
	}
	for i := range r.next {
		out = append(out, r.ring[i].eventLocked())
	}
	return out
}

// Reset forgets the events in the ring (the file, if any, is left as it is).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.ring)
	r.next, r.full = 0, false
}

// Subscribe delivers every event recorded from now on to the returned channel until cancel is
// called. The channel is buffered; a subscriber that falls behind by more than buf events misses
// events instead of slowing the server down.
func (r *Recorder) Subscribe(buf int) (events <-chan Event, cancel func()) {
	ch := make(chan Event, buf)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.subs[ch]; ok {
			delete(r.subs, ch)
			close(ch)
		}
	}
}

// Close flushes and closes the trace file.
func (r *Recorder) Close() error {
	var err error
	r.close.Do(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.file != nil {
			err = r.w.Flush()
			if cerr := r.file.Close(); err == nil {
				err = cerr
			}
		}
	})
	return err
}

// AppendFile appends one event as a JSON line to path, for short-lived writers such as a CNI plugin
// invocation (see event.AppendFile).
func AppendFile(path string, ev Event) error { return event.AppendFile(path, ev) }

// ReadFile reads a JSON-lines trace; a line that is not an event is reported with its number.
func ReadFile(path string) ([]Event, error) { return event.ReadFile(path) }

// Read parses JSON-lines events from r; name is used in error messages.
func Read(r io.Reader, name string) ([]Event, error) { return event.Read(r, name) }
