// Package event is the boundary-trace event format and its JSON-lines file, with no dependency
// outside the standard library.
//
// It exists apart from package trace (which re-exports everything here under the same names) so
// that a short-lived writer such as the cni-fake plugin binary, exec'd once per CNI call, can write
// trace events without linking gRPC and protobuf: their package initialisation adds about 1.5 ms to
// every exec, which is half the cost of a whole CNI invocation.
package event

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Interface names used in Event.Interface.
const (
	CRI = "CRI"
	CNI = "CNI"
	CSI = "CSI"
	// Registration is the kubelet's plugin registration API (pluginregistration.v1).
	Registration = "REG"
)

// Event is one call across an interface boundary: who called whom, which method, what went in and
// what came out, and how long it took. Request and Response hold JSON (protojson for gRPC, the CNI
// config and result for CNI) with secrets already redacted.
type Event struct {
	// Seq numbers the events of one recorder in the order they finished.
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Interface string    `json:"interface"`
	Caller    string    `json:"caller"`
	Callee    string    `json:"callee"`
	// Service is the gRPC service ("runtime.v1.RuntimeService") or the CNI plugin type.
	Service string `json:"service,omitempty"`
	// Method is the RPC name ("RunPodSandbox") or the CNI verb ("ADD").
	Method string `json:"method"`
	// Code is the gRPC status code name ("OK", "NotFound") or, for CNI, "OK" or the CNI error code.
	Code       string          `json:"code"`
	Error      string          `json:"error,omitempty"`
	DurationNS int64           `json:"durationNs"`
	Request    json.RawMessage `json:"request,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
	// Attrs carries what does not fit the request/response shape: the CNI container ID, netns and
	// interface name, the ID of the fault rule applied to the call (key "fault"), the peer of a
	// gRPC call.
	Attrs map[string]string `json:"attrs,omitempty"`

	// lazy renders Request and Response on first use, so recording stays cheap on the hot path.
	lazy func(*Event)
}

// Duration returns the call's duration.
func (e *Event) Duration() time.Duration { return time.Duration(e.DurationNS) }

// Render fills Request and Response from the renderer set with SetRenderer, once.
func (e *Event) Render() {
	if e.lazy != nil {
		f := e.lazy
		e.lazy = nil
		f(e)
	}
}

// SetRenderer defers the rendering of Request and Response until the event is read or written.
// The renderer must only read values that nobody mutates after the call has finished.
func (e *Event) SetRenderer(f func(*Event)) { e.lazy = f }

// AppendFile appends one event as a JSON line to path, for short-lived writers such as a CNI plugin
// invocation. A single write of one line to a file opened O_APPEND does not interleave with other
// writers' lines.
func AppendFile(path string, ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now().Add(-ev.Duration())
	}
	ev.Render()
	b, err := json.Marshal(&ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile reads a JSON-lines trace; a line that is not an event is reported with its number.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// Read parses JSON-lines events from r; name is used in error messages.
func Read(r io.Reader, name string) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return out, fmt.Errorf("%s:%d: not a trace event: %w", name, line, err)
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}
