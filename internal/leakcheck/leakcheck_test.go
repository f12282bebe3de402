package leakcheck

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

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

// settleFails runs Settle on a recorder and returns its failure message ("" when it settled).
func settleFails(t *testing.T, base Snapshot, tol Tolerance) (msg string) {
	f := &fatalRecorder{TB: t}
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
		msg = f.msg
	}()
	Settle(f, base, tol, 300*time.Millisecond)
	return ""
}

func TestSettleWaitsForWhatWindsDown(t *testing.T) {
	base := Take()
	stop := make(chan struct{})
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-stop; f.Close() }()
	go func() { time.Sleep(50 * time.Millisecond); close(stop) }() // the load's own pace, not the check's
	if msg := settleFails(t, base, Tolerance{HeapBytes: 1 << 20}); msg != "" {
		t.Fatalf("a goroutine and an fd that end on their own did not settle: %s", msg)
	}
}

func TestSettleFailsOnALeakNamingIt(t *testing.T) {
	base := Take()
	stop := make(chan struct{})
	defer close(stop)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	leaked := make([]byte, 8<<20)
	go func() { <-stop }()
	msg := settleFails(t, base, Tolerance{HeapBytes: 1 << 20})
	for _, want := range []string{"+1 goroutines", "+1 open fds", "heap +8.", "/dev/null", "TestSettleFailsOnALeakNamingIt"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, msg)
		}
	}
	leaked[0] = 1 // live until here
}

func TestToleranceAllowsWhatItStates(t *testing.T) {
	base := Snapshot{Goroutines: 10, FDs: 5, HeapBytes: 100}
	if ok, over := (Snapshot{Goroutines: 12, FDs: 6, HeapBytes: 150}).Within(base, Tolerance{Goroutines: 2, FDs: 1, HeapBytes: 50}); !ok {
		t.Fatalf("within tolerance reported over: %s", over)
	}
	if ok, _ := (Snapshot{Goroutines: 13, FDs: 5, HeapBytes: 100}).Within(base, Tolerance{Goroutines: 2}); ok {
		t.Fatal("3 goroutines over a tolerance of 2 reported within")
	}
}
