package runtime

import (
	"fmt"
	"io"
	"sync"

	"github.com/plugsim/plugsim/cri-fake/process"
)

// lazyLog is a container's CRI log file. containerd opens it at StartContainer, so a client can
// open it as soon as the call returns (critest does); the kubelet and critest create the log
// directory before CreateContainer. lazyLog opens the file at StartContainer when the directory
// exists (one open tells), and otherwise makes the directories and the file at the first output
// or at ReopenContainerLog. What it buys: StartContainer makes one system call for the log
// instead of a stat, a mkdir-all and an open, and a silent container whose log directory nobody
// made costs no file (making two directories and a file costs more than the runtime's
// bookkeeping for a whole pod lifecycle: BenchmarkPodLifecycle in cri-fake/server, whose pods'
// log directories are never made).
type lazyLog struct {
	path string
	logf func(string, ...any)

	mu      sync.Mutex
	w       *process.LogWriter
	streams map[string]io.WriteCloser
	failed  bool
	closed  bool
}

// openIfDirExists opens the log file at StartContainer when its directory exists.
func (l *lazyLog) openIfDirExists() {
	if l.path == "" {
		return
	}
	if w, err := process.OpenLogWriter(l.path); err == nil {
		l.w = w
	}
}

func (l *lazyLog) openLocked() *process.LogWriter {
	if l.w == nil && !l.failed && !l.closed && l.path != "" {
		w, err := process.NewLogWriter(l.path)
		if err != nil {
			l.failed = true // like a full disk: the output is lost, the process goes on
			l.logf("container log %s: %v", l.path, err)
			return nil
		}
		l.w = w
	}
	return l.w
}

func (l *lazyLog) stream(name string) io.Writer { return logStream{l, name} }

type logStream struct {
	l    *lazyLog
	name string
}

func (s logStream) Write(p []byte) (int, error) {
	l := s.l
	l.mu.Lock()
	w := l.openLocked()
	var st io.WriteCloser
	if w != nil {
		if l.streams == nil {
			l.streams = map[string]io.WriteCloser{}
		}
		if st = l.streams[s.name]; st == nil {
			st = w.Stream(s.name)
			l.streams[s.name] = st
		}
	}
	l.mu.Unlock()
	if st != nil {
		st.Write(p)
	}
	return len(p), nil
}

// reopen starts a new file at the log path (ReopenContainerLog after the kubelet's rotation),
// creating it if the process has not written yet.
func (l *lazyLog) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return nil
	}
	if l.w == nil {
		l.failed = false
		if l.openLocked() == nil {
			return fmt.Errorf("open %s", l.path)
		}
		return nil
	}
	return l.w.Reopen()
}

func (l *lazyLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.streams {
		s.Close()
	}
	if l.w != nil {
		l.w.Close()
	}
	l.closed = true
}
