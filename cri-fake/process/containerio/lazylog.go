package containerio

import (
	"fmt"
	"io"
	"sync"
)

// LazyLog is a container's CRI log file as a runtime keeps it (cri-fake/runtime's simulated
// tasks): Path is the log_path, Logf (optional) reports a file that cannot be written.
// containerd opens it at StartContainer, so a client can open it as soon as the call returns (critest does); the kubelet and critest create the log
// directory before CreateContainer. LazyLog opens the file at StartContainer when the directory
// exists (one open tells), and otherwise makes the directories and the file at the first output
// or at ReopenContainerLog. What it buys: StartContainer makes one system call for the log
// instead of a stat, a mkdir-all and an open, and a silent container whose log directory nobody
// made costs no file (making two directories and a file costs more than the runtime's
// bookkeeping for a whole pod lifecycle: BenchmarkPodLifecycle in cri-fake/server, whose pods'
// log directories are never made).
type LazyLog struct {
	Path string
	Logf func(string, ...any)

	mu      sync.Mutex
	w       *LogWriter
	streams map[string]io.WriteCloser
	failed  bool
	closed  bool
}

// OpenIfDirExists opens the log file at StartContainer when its directory exists.
func (l *LazyLog) OpenIfDirExists() {
	if l.Path == "" {
		return
	}
	if w, err := OpenLogWriter(l.Path); err == nil {
		l.w = w
	}
}

func (l *LazyLog) openLocked() *LogWriter {
	if l.w == nil && !l.failed && !l.closed && l.Path != "" {
		w, err := NewLogWriter(l.Path)
		if err != nil {
			l.failed = true // like a full disk: the output is lost, the process goes on
			if l.Logf != nil {
				l.Logf("container log %s: %v", l.Path, err)
			}
			return nil
		}
		l.w = w
	}
	return l.w
}

func (l *LazyLog) Stream(name string) io.Writer { return lazyStream{l, name} }

type lazyStream struct {
	l    *LazyLog
	name string
}

func (s lazyStream) Write(p []byte) (int, error) {
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

// Reopen starts a new file at the log path (ReopenContainerLog after the kubelet's rotation),
// creating it if the process has not written yet.
func (l *LazyLog) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Path == "" {
		return nil
	}
	if l.w == nil {
		l.failed = false
		if l.openLocked() == nil {
			return fmt.Errorf("open %s", l.Path)
		}
		return nil
	}
	return l.w.Reopen()
}

func (l *LazyLog) Close() {
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
