package process

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a goroutine-safe output sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write keeps at most 64 KiB so a runaway loop cannot flood the test log.
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if room := 64<<10 - s.b.Len(); room < len(p) {
		if room > 0 {
			s.b.Write(p[:room])
		}
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFS builds a busybox file system view for a test.
func newFS(tb testing.TB, cfg FSConfig) *FS {
	tb.Helper()
	f, err := NewFS(cfg)
	if err != nil {
		tb.Fatalf("NewFS: %v", err)
	}
	return f
}

// startProc starts spec and makes sure the process is gone when the test ends.
func startProc(tb testing.TB, spec Spec) *Process {
	tb.Helper()
	p, err := Start(context.Background(), spec)
	if err != nil {
		tb.Fatalf("Start(%q): %v", spec.Args, err)
	}
	tb.Cleanup(func() {
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
	})
	return p
}

// hangBound is how long a test waits for something that must happen before it calls it a hang.
// It bounds hangs only, never speed: a -race run on a machine shared with other jobs can take
// seconds for what takes milliseconds alone.
const hangBound = 2 * time.Minute

// runCmd runs args as a container's main process to completion.
func runCmd(tb testing.TB, spec Spec) (stdout, stderr string, code int) {
	tb.Helper()
	var so, se syncBuffer
	spec.Stdout, spec.Stderr = &so, &se
	p := startProc(tb, spec)
	select {
	case <-p.Done():
	case <-time.After(hangBound):
		tb.Fatalf("%q did not exit in %v; stdout %q stderr %q", spec.Args, hangBound, so.String(), se.String())
	}
	code, _ = p.ExitCode()
	return so.String(), se.String(), code
}

// sh runs `sh -c script` in fsys (a fresh busybox view when nil) as root.
func sh(tb testing.TB, fsys *FS, script string) (stdout, stderr string, code int) {
	tb.Helper()
	if fsys == nil {
		fsys = newFS(tb, FSConfig{Hostname: "testhost"})
	}
	return runCmd(tb, Spec{Args: []string{"sh", "-c", script}, FS: fsys, Hostname: "testhost"})
}

// waitFor polls cond until it holds or hangBound passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(hangBound)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
