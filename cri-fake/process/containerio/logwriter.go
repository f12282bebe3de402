package containerio

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Stream names in the CRI log format.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// maxLogLine is where a line without newline is cut into partial (P) records;
// containerd's cio reads lines through a 16 KiB bufio reader.
const MaxLogLine = 16 * 1024

// LogWriter writes a container's output to log_path in the CRI log format
// kubelet parses (pkg/kubelet/kuberuntime/logs):
//
//	<RFC3339Nano timestamp> <stdout|stderr> <F|P> <content>\n
//
// A complete line is tagged F; a line longer than 16 KiB is split into P
// records ending with an F record. A trailing line without newline is kept
// until its newline arrives or the stream is closed (then it is written as F,
// as containerd does at EOF). Safe for concurrent use.
//
// What it keeps in memory is bounded whatever the output: under MaxLogLine of a line still open
// per stream, and the records of one write batched into at most flushAt bytes before they go to
// the file (TestLogStreamKeepsLessThanALineWhateverTheWrite). The file itself is the kubelet's to
// rotate (ReopenContainerLog).
type LogWriter struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	now   func() time.Time
	batch []byte // records not yet written to f; flushed at flushAt and at the end of each write
}

// flushAt is the size at which batched records are written to the file: a write of many short
// lines costs a system call per 64 KiB, not one per line.
const flushAt = 64 << 10

// NewLogWriter opens (creating parent directories and the file, appending)
// the log at path.
func NewLogWriter(path string) (*LogWriter, error) {
	w := &LogWriter{path: path, now: time.Now}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

// OpenLogWriter opens (creating the file, appending) the log at path in a directory that
// exists already; it fails with an error satisfying errors.Is(err, fs.ErrNotExist) when the
// directory does not. It costs one system call where NewLogWriter costs three.
func OpenLogWriter(path string) (*LogWriter, error) {
	w := &LogWriter{path: path, now: time.Now}
	if err := w.openFile(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *LogWriter) open() error {
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return err
	}
	return w.openFile()
}

func (w *LogWriter) openFile() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	w.f = f
	return nil
}

// Reopen closes the current file and opens log_path again, creating a new
// file if the old one was renamed away (ReopenContainerLog after kubelet's
// log rotation).
func (w *LogWriter) Reopen() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.flushLocked() // what was written before the rotation belongs to the old file
		w.f.Close()
		w.f = nil
	}
	return w.open()
}

// Path is the log file path.
func (w *LogWriter) Path() string { return w.path }

// Close closes the file. Streams must be closed first to flush partial lines.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.flushLocked()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}

// record adds one record to the batch, writing the batch out once it reaches flushAt.
func (w *LogWriter) record(stream, tag string, content []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	b := w.now().AppendFormat(w.batch, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, ' ')
	b = append(b, tag...)
	b = append(b, ' ')
	b = append(b, content...)
	w.batch = append(b, '\n')
	if len(w.batch) >= flushAt {
		return w.flushLocked()
	}
	return nil
}

// flush writes the batched records to the file.
func (w *LogWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *LogWriter) flushLocked() error {
	if len(w.batch) == 0 {
		return nil
	}
	if w.f == nil {
		w.batch = w.batch[:0]
		return os.ErrClosed
	}
	_, err := w.f.Write(w.batch)
	if cap(w.batch) > 2*flushAt {
		w.batch = nil // a record of a long line grew it; do not keep that
	} else {
		w.batch = w.batch[:0]
	}
	return err
}

// Stream returns a writer for one stream ("stdout" or "stderr"). Close it
// when the process ends to flush a last line without newline.
func (w *LogWriter) Stream(name string) io.WriteCloser {
	return &logStream{w: w, name: name}
}

type logStream struct {
	mu   sync.Mutex
	w    *LogWriter
	name string
	buf  []byte
}

// Write cuts p into records as it goes, keeping only the start of a line still open at its end
// (under MaxLogLine: a longer one has been written out as P records), so what a stream holds does
// not depend on how much a process writes at once.
func (s *logStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		if err := s.line(p[:i], true); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	if err := s.line(p, false); err != nil {
		return 0, err
	}
	if err := s.w.flush(); err != nil {
		return 0, err
	}
	return n, nil
}

// line writes the pending start of a line followed by seg as records: P records of MaxLogLine
// while there is more, then, when the line is complete, the rest as an F record; the rest of an
// incomplete line (under MaxLogLine) stays pending.
func (s *logStream) line(seg []byte, complete bool) error {
	for len(s.buf)+len(seg) > MaxLogLine || (!complete && len(s.buf)+len(seg) == MaxLogLine) {
		take := MaxLogLine - len(s.buf)
		rec := seg[:take]
		if len(s.buf) > 0 {
			s.buf = append(s.buf, rec...)
			rec = s.buf
		}
		if err := s.w.record(s.name, "P", rec); err != nil {
			return err
		}
		s.buf = s.buf[:0]
		seg = seg[take:]
	}
	if !complete {
		s.buf = append(s.buf, seg...)
		if len(s.buf) == 0 {
			s.buf = nil
		}
		return nil
	}
	rec := seg
	if len(s.buf) > 0 {
		rec = append(s.buf, seg...)
	}
	s.buf = nil
	return s.w.record(s.name, "F", rec)
}

// emit writes one logical line, splitting it into P records when long.
func (s *logStream) emit(line []byte, full bool) error {
	for len(line) > MaxLogLine {
		if err := s.w.record(s.name, "P", line[:MaxLogLine]); err != nil {
			return err
		}
		line = line[MaxLogLine:]
	}
	tag := "P"
	if full {
		tag = "F"
	}
	return s.w.record(s.name, tag, line)
}

// Close flushes a pending line without newline as a partial (P) record, as containerd's CRI logger
// writes the end of a stream that does not end in a newline (internal/cri/io/logger.go
// redirectLogs: "it should be treated as a partial line"): a reader then joins it with nothing,
// so the kubelet's FallbackToLogsOnError message of `echo -n DONE` is "DONE", not "DONE\n".
func (s *logStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) == 0 {
		return nil
	}
	err := s.emit(s.buf, false)
	s.buf = nil
	if ferr := s.w.flush(); err == nil {
		err = ferr
	}
	return err
}
