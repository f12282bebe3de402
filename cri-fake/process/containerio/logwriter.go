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
type LogWriter struct {
	mu   sync.Mutex
	path string
	f    *os.File
	now  func() time.Time
}

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
	err := w.f.Close()
	w.f = nil
	return err
}

func (w *LogWriter) record(stream, tag string, content []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	var b bytes.Buffer
	b.Grow(len(content) + 48)
	b.WriteString(w.now().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteString(tag)
	b.WriteByte(' ')
	b.Write(content)
	b.WriteByte('\n')
	_, err := w.f.Write(b.Bytes())
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

func (s *logStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		line := s.buf[:i]
		if err := s.emit(line, true); err != nil {
			return 0, err
		}
		s.buf = s.buf[i+1:]
	}
	for len(s.buf) >= MaxLogLine {
		if err := s.w.record(s.name, "P", s.buf[:MaxLogLine]); err != nil {
			return 0, err
		}
		s.buf = s.buf[MaxLogLine:]
	}
	if len(s.buf) == 0 {
		s.buf = nil
	}
	return len(p), nil
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

// Close flushes a pending line without newline as a full (F) record.
func (s *logStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) == 0 {
		return nil
	}
	err := s.emit(s.buf, true)
	s.buf = nil
	return err
}
