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
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
	"unicode/utf8"
)

// Interface names used in Event.Interface.
const (
	CRI = "CRI"
	CNI = "CNI"
	CSI = "CSI"
	// Registration is the kubelet's plugin registration API (pluginregistration.v1).
	Registration = "REG"
	// OCI is the OCI runtime's command line: cri-fake (as containerd's shim) runs runc's create,
	// start, exec, kill, delete and state for a program container (cri-fake/oci).
	OCI = "OCI"
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
	// Truncated is how many bytes of Request and Response were cut (see Truncate); 0 when the
	// event holds them whole.
	Truncated int64 `json:"truncated,omitempty"`

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

// MaxPayload bounds the bytes of an event's Request and of its Response as recorders keep them
// in memory, write them to a file and readers hand them on: a 15 MB ExecSync answer or a 15 MiB
// label selector would otherwise be held whole by every ring slot, file line and reader.
const MaxPayload = 1 << 20

// Truncate cuts a Request or Response longer than max bytes: it becomes a JSON string holding
// its first max bytes (cut at a UTF-8 boundary), and Truncated grows by the bytes dropped. The
// event stays valid JSON; a reader that wants the message itself sees that it cannot have it.
func (e *Event) Truncate(max int) {
	e.Request = e.truncated(e.Request, max)
	e.Response = e.truncated(e.Response, max)
}

func (e *Event) truncated(raw json.RawMessage, limit int) json.RawMessage {
	if len(raw) <= limit {
		return raw
	}
	// The cut text is encoded as a JSON string, whose escapes make it longer: cut further until
	// the encoding fits in limit, so that cutting again changes nothing.
	cut := limit - 2
	for {
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		b, err := json.Marshal(string(raw[:cut]))
		if err != nil || cut <= 0 {
			b = []byte(`""`)
		}
		if len(b) <= limit || cut <= 0 {
			e.Truncated += int64(len(raw) - max(cut, 0))
			return b
		}
		cut -= len(b) - limit
	}
}

// Size is about how many bytes the event holds: its payloads, error and names.
func (e *Event) Size() int64 {
	n := len(e.Request) + len(e.Response) + len(e.Error) + len(e.Method) + len(e.Service) + len(e.Caller) + len(e.Callee) + 64
	for k, v := range e.Attrs {
		n += len(k) + len(v)
	}
	return int64(n)
}

// AppendFile appends one event as a JSON line to path, for short-lived writers such as a CNI plugin
// invocation. A single write of one line to a file opened O_APPEND does not interleave with other
// writers' lines.
func AppendFile(path string, ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now().Add(-ev.Duration())
	}
	ev.Render()
	ev.Truncate(MaxPayload)
	b, err := json.Marshal(&ev)
	if err != nil {
		return err
	}
	f, err := OpenAppend(path)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// FileMode is the mode of every trace file: its owner's only. A trace holds what crossed each
// interface: a container's environment (Secret values a pod takes from env), a volume's context and
// paths, registry user names (credentials and CSI secrets themselves are redacted). On a node a
// process's environment is owner-only and the kubelet's pod directory is 0750 (issue 24).
const FileMode = 0o600

// OpenAppend opens a trace file for appending: created FileMode, never through a symlink
// (O_NOFOLLOW: a link planted at path is an error, not a way to append to its target), and a file
// found with a wider mode (written by an older plugsim) narrowed to FileMode.
func OpenAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, FileMode)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err == nil && fi.Mode().Perm()&^FileMode != 0 {
		err = f.Chmod(FileMode)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads a JSON-lines trace; a line that is not an event is reported with its number.
// The file a recorder rotated out (path.1, see trace.Options.FileMaxBytes) is read first.
func ReadFile(path string) ([]Event, error) {
	var out []Event
	if f, err := os.Open(path + ".1"); err == nil {
		out, err = Read(f, path+".1")
		f.Close()
		if err != nil {
			return out, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	evs, err := Read(f, path)
	return append(out, evs...), err
}

// Read parses JSON-lines events from r; name is used in error messages. A line may be of any
// length (a writer before payloads were bounded wrote lines of 94 MB): it is read whole, decoded,
// and its payloads are cut to MaxPayload, so what Read returns is bounded per event.
func Read(r io.Reader, name string) ([]Event, error) {
	var out []Event
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := readLine(br)
		if len(bytes.TrimSpace(b)) > 0 {
			var ev Event
			if jerr := json.Unmarshal(b, &ev); jerr != nil {
				return out, fmt.Errorf("%s:%d: not a trace event: %w", name, line, jerr)
			}
			ev.Truncate(MaxPayload)
			out = append(out, ev)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

// readLine returns the next line without its newline, however long it is.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}
