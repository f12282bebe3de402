package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRead: a trace file (what `harness trace` and `harness replay` read) is read event by event;
// a line that is not an event is reported with its file name and number, never a panic, and
// every event read writes back to a line that reads as the same event.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2026-01-02T03:04:05.000000006Z","interface":"CRI","caller":"kubelet","callee":"cri-fake","method":"Version","code":"OK","durationNs":5,"request":{},"response":{"version":"0.1.0"}}` + "\n" +
		`{"seq":2,"interface":"CNI","method":"ADD","code":"7","error":"bad","attrs":{"containerID":"x"}}` + "\n\n"))
	f.Add([]byte(`{"seq":1}` + "\r\n" + `{"seq":`))
	f.Add([]byte(`{"request":[1,2}`))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := Read(bytes.NewReader(data), "t.jsonl")
		if err != nil && !strings.HasPrefix(err.Error(), "t.jsonl:") {
			t.Fatalf("error %v does not name the file and line", err)
		}
		for _, ev := range evs {
			b, err := json.Marshal(&ev)
			if err != nil {
				t.Fatalf("event %+v does not marshal: %v", ev, err)
			}
			again, err := Read(bytes.NewReader(append(b, '\n')), "again")
			if err != nil || len(again) != 1 || again[0].Seq != ev.Seq || again[0].Method != ev.Method {
				t.Fatalf("%s reads back as %+v, %v", b, again, err)
			}
		}
	})
}
