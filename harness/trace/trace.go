// Package trace records the calls that cross a plugin interface boundary (CRI, CNI, CSI and the
// kubelet's plugin registration) as one event format that every fake writes and the harness reads.
//
// A Recorder keeps the newest events in a bounded in-memory ring and, optionally, appends each one as
// a JSON line to a file. cni-fake, which lives only as long as one CNI invocation, appends to the same
// kind of file, so the harness can merge the three fakes' files by time into one boundary trace.
package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/plugsim/plugsim/harness/trace/event"
)

// Interface names used in Event.Interface.
const (
	CRI = event.CRI
	CNI = event.CNI
	CSI = event.CSI
	// Registration is the kubelet's plugin registration API (pluginregistration.v1).
	Registration = event.Registration
	// OCI is the runc command line cri-fake drives for program containers (cri-fake → runc).
	OCI = event.OCI
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
	// MaxBytes bounds the bytes the ring holds (the events' payloads, see Event.Size): the oldest
	// events are dropped to stay under it, whatever Capacity says. 0 means DefaultMaxBytes.
	MaxBytes int64
	// FileMaxBytes bounds the trace file: a line that would take it past this renames it to
	// File+".1" (replacing the one before) and starts File afresh, so the two hold at most twice
	// this. ReadFile reads File+".1" first. 0 means DefaultFileMaxBytes; negative, no bound.
	FileMaxBytes int64
}

// DefaultCapacity is the ring size when Options.Capacity is 0.
const DefaultCapacity = 4096

// DefaultMaxBytes is the ring's byte bound when Options.MaxBytes is 0. Each event's request and
// response are cut to event.MaxPayload, so even a ring of the largest events holds 32 of them.
const DefaultMaxBytes = 64 << 20

// DefaultFileMaxBytes is the trace file's bound when Options.FileMaxBytes is 0.
const DefaultFileMaxBytes = 256 << 20

// MaxPayload bounds an event's request and its response, each (see Event.Truncate).
const MaxPayload = event.MaxPayload

// Recorder is a bounded, concurrency-safe event log. The zero value is not usable; use New.
type Recorder struct {
	mu       sync.Mutex
	ring     []slot
	head     int   // index of the oldest event
	n        int   // events in the ring
	bytes    int64 // their sizes' sum
	maxBytes int64
	seq      uint64
	path     string
	fileMax  int64 // <= 0: no bound
	fileSize int64
	file     *os.File
	w        *bufio.Writer
	subs     map[chan Event]struct{}
	close    sync.Once
	// prefixes is the wire prefix the last cut message of each type kept (see measure), which
	// the next one of that type shares when its own is the same: a node's relist answers are
	// the same second after second while nothing changes, and the ring holds dozens of them.
	// One per message type with long lists: bounded by the types compiled in.
	prefixes map[protoreflect.FullName][]byte
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
	r := &Recorder{ring: make([]slot, capacity), subs: map[chan Event]struct{}{}, maxBytes: opts.MaxBytes, fileMax: opts.FileMaxBytes}
	if r.maxBytes <= 0 {
		r.maxBytes = DefaultMaxBytes
	}
	if r.fileMax == 0 {
		r.fileMax = DefaultFileMaxBytes
	}
	if opts.File != "" {
		r.path = opts.File
		if err := r.openFile(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Recorder) openFile() error {
	f, err := event.OpenAppend(r.path)
	if err != nil {
		return fmt.Errorf("open trace file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open trace file: %w", err)
	}
	r.file, r.w, r.fileSize = f, bufio.NewWriter(f), fi.Size()
	return nil
}

// rotateLocked moves the full trace file to path.1 and starts a new one.
func (r *Recorder) rotateLocked() error {
	r.w.Flush()
	r.file.Close()
	r.file, r.w = nil, nil
	if err := os.Rename(r.path, r.path+".1"); err != nil {
		return err
	}
	return r.openFile()
}

// slot is one entry of the ring. A call served through the gRPC interceptors is kept as the
// interceptor saw it (call) and becomes an Event only when somebody reads the ring: recording a
// call then allocates nothing and writes two cache lines, where a whole Event is four. What was
// recorded as an Event, or has been read once, is kept as ev.
type slot struct {
	call call
	ev   *Event
	size int64 // what the slot counts for in Recorder.bytes
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
	} else {
		ev.Render()
		ev.Truncate(MaxPayload)
	}
	if len(r.ring) == 0 {
		return
	}
	r.storeLocked(slot{ev: &ev, size: ev.Size()})
}

// recordCall stores a served gRPC call; it is Record for the interceptors' hot path.
func (r *Recorder) recordCall(c call) {
	// Measured before the lock is taken: proto.Size walks the messages, their maps by
	// reflection, and the other clients' calls need not wait for that.
	req, resp := c.measure()
	size := c.size(req, resp)
	r.mu.Lock()
	defer r.mu.Unlock()
	req.wire, resp.wire = r.sharedPrefixLocked(req), r.sharedPrefixLocked(resp)
	r.seq++
	c.seq = r.seq
	if r.w != nil || len(r.subs) > 0 {
		ev, _ := c.bounded(req, resp)
		ev = r.publishLocked(ev)
		if len(r.ring) > 0 {
			r.storeLocked(slot{ev: &ev, size: ev.Size()})
		}
		return
	}
	if len(r.ring) == 0 {
		return
	}
	if size > MaxPayload || req.cut || resp.cut {
		// Bounded now, so the ring does not hold the whole message until somebody reads it
		// (40 ExecSync answers of 15 MB each took cri-fake to 1.65 GB): a long listing keeps
		// the prefix measure cut, another large message is rendered and cut.
		ev, pending := c.bounded(req, resp)
		r.storeLocked(slot{ev: &ev, size: ev.Size() + pending})
		return
	}
	r.storeLocked(slot{call: c, size: size})
}

// sharedPrefixLocked returns m's kept wire prefix, or the equal one the last cut message of its
// type kept, so that the ring holds one copy of a listing's prefix that did not change.
func (r *Recorder) sharedPrefixLocked(m measured) []byte {
	if m.wire == nil {
		return nil
	}
	name := m.msg.ProtoReflect().Descriptor().FullName()
	if last := r.prefixes[name]; bytes.Equal(last, m.wire) {
		return last
	}
	if r.prefixes == nil {
		r.prefixes = map[protoreflect.FullName][]byte{}
	}
	r.prefixes[name] = m.wire
	return m.wire
}

// storeLocked puts s in the ring, dropping the oldest events while the ring is full by count or
// s would take it past its byte bound.
func (r *Recorder) storeLocked(s slot) {
	for r.n > 0 && (r.n == len(r.ring) || r.bytes+s.size > r.maxBytes) {
		r.bytes -= r.ring[r.head].size
		r.ring[r.head] = slot{}
		r.head = (r.head + 1) % len(r.ring)
		r.n--
	}
	r.ring[(r.head+r.n)%len(r.ring)] = s
	r.n++
	r.bytes += s.size
}

// eventLocked returns the event in the i-th oldest slot, turning a call into its event once and
// cutting its payloads to MaxPayload (a message's JSON can be larger than its wire size).
func (r *Recorder) eventLocked(i int) Event {
	s := &r.ring[(r.head+i)%len(r.ring)]
	if s.ev == nil {
		ev := s.call.event()
		s.ev, s.call = &ev, call{}
	}
	s.ev.Render() // in place, so the next reader does not render again
	s.ev.Truncate(MaxPayload)
	size := s.ev.Size()
	r.bytes += size - s.size
	s.size = size
	return *s.ev
}

// Bytes is about how many bytes the events in the ring hold (see Options.MaxBytes).
func (r *Recorder) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// publishLocked renders ev and hands it to the trace file and the subscribers; it returns the
// rendered event. It is apart from Record so that only this path moves the event to the heap
// (json.Marshal takes its address): recording into the ring alone allocates nothing.
func (r *Recorder) publishLocked(ev Event) Event {
	ev.Render()
	ev.Truncate(MaxPayload)
	if r.w != nil {
		// One JSON line per event, flushed at once, so a reader of the file (the harness, a
		// `tail -f`) sees each call as soon as it has finished.
		if b, err := json.Marshal(&ev); err == nil {
			if r.fileMax > 0 && r.fileSize > 0 && r.fileSize+int64(len(b))+1 > r.fileMax {
				if err := r.rotateLocked(); err != nil {
					return ev // the file is gone; the ring and the subscribers still get events
				}
			}
			r.w.Write(b)
			r.w.WriteByte('\n')
			r.w.Flush()
			r.fileSize += int64(len(b)) + 1
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
	out := make([]Event, 0, r.n)
	for i := range r.n {
		out = append(out, r.eventLocked(i))
	}
	return out
}

// Reset forgets the events in the ring (the file, if any, is left as it is).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.ring)
	r.head, r.n, r.bytes = 0, 0, 0
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
