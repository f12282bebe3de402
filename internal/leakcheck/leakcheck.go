// Package leakcheck tells whether a load left anything behind in the test's process: goroutines,
// open file descriptors and live heap are taken before it (Take) and polled after it until they are
// back within a stated tolerance of that baseline (Settle). It polls rather than sleeping once,
// because what a load leaves winds down at its own pace (a gRPC server's connection goroutines end
// when it reads the client's close, a process simulation's when its process is reaped), and on a
// busy machine no sleep is long enough.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/polltest"
)

// Snapshot is what the process holds at one moment.
type Snapshot struct {
	Goroutines int
	// FDs counts the entries of /proc/self/fd (-1 where there is none).
	FDs int
	// HeapBytes is the live heap (runtime.MemStats.HeapAlloc) after a garbage collection.
	HeapBytes int64
	// RSSBytes is the resident set (VmRSS of /proc/self/status) after the heap was collected and
	// its free pages returned to the OS; a figure to report, not to compare (the Go runtime and the
	// race detector keep some of what they took).
	RSSBytes int64
}

// Take collects the heap and returns what the process holds now.
func Take() Snapshot {
	debug.FreeOSMemory() // a GC, then the free spans returned: HeapAlloc and VmRSS of live data only
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Snapshot{Goroutines: runtime.NumGoroutine(), FDs: countFDs(), HeapBytes: int64(ms.HeapAlloc), RSSBytes: rss()}
}

func (s Snapshot) String() string {
	return fmt.Sprintf("%d goroutines, %d open fds, heap %.1f MiB, RSS %.1f MiB", s.Goroutines, s.FDs, mib(s.HeapBytes), mib(s.RSSBytes))
}

// Tolerance is how far above the baseline a settled process may stay: a few goroutines a
// library starts once and keeps (gRPC's resolver and balancer of a connection not yet torn down,
// a timer), caches that fill once.
type Tolerance struct {
	Goroutines int
	FDs        int
	HeapBytes  int64
}

// Within reports whether s is within tol of base, and otherwise what is over.
func (s Snapshot) Within(base Snapshot, tol Tolerance) (bool, string) {
	var over []string
	if d := s.Goroutines - base.Goroutines; d > tol.Goroutines {
		over = append(over, fmt.Sprintf("%+d goroutines (tolerance %d)", d, tol.Goroutines))
	}
	if d := s.FDs - base.FDs; d > tol.FDs {
		over = append(over, fmt.Sprintf("%+d open fds (tolerance %d)", d, tol.FDs))
	}
	if d := s.HeapBytes - base.HeapBytes; d > tol.HeapBytes {
		over = append(over, fmt.Sprintf("heap %+.1f MiB (tolerance %.1f MiB)", mib(d), mib(tol.HeapBytes)))
	}
	return len(over) == 0, strings.Join(over, ", ")
}

// Settle polls the process until it is within tol of base and returns what it then holds. After
// timeout it fails tb with what was still over, the open fds and the goroutines' stacks.
func Settle(tb testing.TB, base Snapshot, tol Tolerance, timeout time.Duration) Snapshot {
	tb.Helper()
	var last Snapshot
	polltest.Until(tb, "goroutines, open fds and heap back to their baseline ("+base.String()+")", timeout, 100*time.Millisecond, func() (bool, string) {
		last = Take()
		ok, over := last.Within(base, tol)
		if ok {
			return true, ""
		}
		desc := last.String() + ": " + over
		if last.FDs-base.FDs > tol.FDs {
			desc += "\nopen fds:\n" + fdTargets()
		}
		if last.Goroutines-base.Goroutines > tol.Goroutines {
			var b strings.Builder
			pprof.Lookup("goroutine").WriteTo(&b, 1) // stacks grouped, with their counts
			desc += "\ngoroutines:\n" + b.String()
		}
		return false, desc
	})
	return last
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// fdTargets lists what each open fd is (a file's path, socket:[inode], pipe:[inode]).
func fdTargets() string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		t, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(&b, "  %s -> %s\n", e.Name(), t)
	}
	return b.String()
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	return -1
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
