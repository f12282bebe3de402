package collect

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/trace"
)

func TestFileSourceReadsOnlyNewWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni.jsonl")
	t0 := time.Now()
	if err := trace.AppendFile(path, trace.Event{Method: "OLD", Time: t0}); err != nil {
		t.Fatal(err)
	}
	src := File("cni", path, false)
	trace.AppendFile(path, trace.Event{Method: "ADD", Time: t0.Add(time.Second)})
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"method":"HALF`) // a writer half-way through a line
	f.Close()
	evs, err := src.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Method != "ADD" {
		t.Fatalf("got %+v, want only ADD", evs)
	}
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`"}` + "\n")
	f.Close()
	if evs, _ = src.Next(); len(evs) != 1 || evs[0].Method != "HALF" {
		t.Fatalf("got %+v, want the completed line", evs)
	}
}

func TestCollectorMergesByStartTime(t *testing.T) {
	rec, _ := trace.New(trace.Options{})
	t0 := time.Now()
	path := filepath.Join(t.TempDir(), "cni.jsonl")
	c := &Collector{Sources: []Source{Recorder("cri", rec), File("cni", path, true)}}
	// RunPodSandbox finishes after the CNI ADD it caused, but started before it.
	trace.AppendFile(path, trace.Event{Method: "ADD", Time: t0.Add(time.Millisecond)})
	rec.Record(trace.Event{Method: "RunPodSandbox", Time: t0})
	rec.Record(trace.Event{Method: "PodSandboxStatus", Time: t0.Add(5 * time.Millisecond)})
	evs, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Method)
	}
	if len(got) != 3 || got[0] != "RunPodSandbox" || got[1] != "ADD" || got[2] != "PodSandboxStatus" {
		t.Errorf("order %v", got)
	}
	if evs, _ := c.Next(); len(evs) != 0 {
		t.Errorf("second Next returned %d old events", len(evs))
	}
}
