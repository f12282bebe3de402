package task

import (
	"testing"
	"time"
)

// Done is closed by Ended whether it was asked for before or after, and the callback runs once.
func TestExitNoticeDone(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	var before, after ExitNotice
	early := before.Done()
	calls := 0
	before.NotifyExit(func() { calls++ })
	if closed(early) || before.done == nil || after.done != nil {
		t.Fatal("Done is closed before the end, or not made when asked, or made when not")
	}
	before.Ended()
	before.Ended()
	after.Ended()
	select {
	case <-early:
	case <-time.After(10 * time.Second):
		t.Fatal("Done asked for before the end is not closed by Ended")
	}
	if !closed(after.Done()) || calls != 1 {
		t.Fatalf("Done asked for after the end closed %v, callback ran %d times, want once", closed(after.Done()), calls)
	}
}
