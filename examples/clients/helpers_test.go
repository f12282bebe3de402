package clients

import (
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/trace"
)

// calls lists method:code of the recorded events of one interface.
func calls(evs []trace.Event, iface string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Interface == iface {
			out = append(out, ev.Method+":"+ev.Code)
		}
	}
	return out
}

// nextEvent waits for the next event of method on a Subscribe channel. A fake records a call when
// its handler returns, which for a call the client gave up on (a deadline) is after the client has
// its answer: a test waits for the event instead of reading the ring at once.
func nextEvent(t testing.TB, events <-chan trace.Event, method string) trace.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Method == method {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s recorded in 30s", method)
		}
	}
}
