// Package crashtest holds what the crash tests of cri-fake's packages share: a writer that panics,
// the defect they inject where a simulated process writes its output, and a log that collects what
// the simulation reports through its Logf (a recovered panic is logged there, so a test that
// expects none fails on any entry).
package crashtest

import (
	"fmt"
	"strings"
	"sync"
)

// PanicWriter stands for a defect of the simulation met while a process writes its output.
type PanicWriter struct{}

func (PanicWriter) Write([]byte) (int, error) { panic("injected defect") }

// Log collects log lines; Logf has the signature of the fakes' Logf options. Safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	entries []string
}

// Logf records one line.
func (l *Log) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, fmt.Sprintf(format, args...))
}

// String returns the lines recorded so far, joined by newlines ("" when none).
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.entries, "\n")
}
