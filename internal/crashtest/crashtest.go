// Package crashtest holds what the crash tests share: a writer that panics, the defect cri-fake's
// tests inject where a simulated process writes its output; a log that collects what the
// simulation reports through its Logf (a recovered panic is logged there, so a test that expects
// none fails on any entry); and the kill -9 of a fake's own binary, built for the test, while
// clients call it, for as many rounds as the run asks.
package crashtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cycles is how many kill -9 rounds a crash test makes: short in `go test`, hundreds in
// `make soak`, which sets PLUGSIM_CRASH_CYCLES.
func Cycles(short int) int {
	if n, err := strconv.Atoi(os.Getenv("PLUGSIM_CRASH_CYCLES")); err == nil && n > 0 {
		return n
	}
	return short
}

// Build builds the main package of the test's directory as name in a temporary directory and
// returns its path: the process a crash test kills is the fake's own binary.
func Build(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

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

// KillUnderLoad has clients goroutines call call(client, i) for i = 0, 1, … until it returns
// false (the server is gone) or the round ends, kills the server with kill after a random pause
// of 50 to 350 ms (the moment of the kill, not a wait for a condition), then ends the round and
// waits for every client to return.
func KillUnderLoad(clients int, rnd *rand.Rand, kill func(), call func(client, i int) bool) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if !call(c, i) {
					return
				}
			}
		}()
	}
	time.Sleep(time.Duration(50+rnd.IntN(300)) * time.Millisecond)
	kill()
	close(stop)
	wg.Wait()
}
