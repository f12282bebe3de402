package polltest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, "the third call", time.Minute, time.Millisecond, func() (bool, string) { n++; return n == 3, "" })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and stops the goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestUntilFailsWithTheLastDescription(t *testing.T) {
	f := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Until did not fail the test (recovered %v)", r)
			}
		}()
		i := 0
		Until(f, "a condition that never holds", 20*time.Millisecond, time.Millisecond, func() (bool, string) { i++; return false, "attempt " + strings.Repeat("I", min(i, 3)) })
	}()
	if !strings.Contains(f.msg, "a condition that never holds") || !strings.Contains(f.msg, "attempt III") {
		t.Fatalf("Fatalf message %q lacks what was waited for or the last description", f.msg)
	}
}
