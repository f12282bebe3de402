// Package polltest waits, in the end-to-end suites, for a condition that only polling can see
// (a kubectl answer, a kubelet's HTTP port, a line in another process's trace file), failing the
// test with the last thing the condition saw.
package polltest

import (
	"testing"
	"time"
)

// Until calls cond every interval until it returns true, and returns how long that took. After
// timeout it fails the test, naming what it waited for and the description cond gave last.
func Until(tb testing.TB, what string, timeout, interval time.Duration, cond func() (bool, string)) time.Duration {
	tb.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, desc := cond()
		if ok {
			return time.Since(start)
		}
		last = desc
		time.Sleep(interval)
	}
	tb.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
	return 0
}
