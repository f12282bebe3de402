package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// execSyncCalls serves n ExecSync calls answering size bytes of stdout each through r's
// interceptor, as cri-fake's server does.
func execSyncCalls(t testing.TB, r *Recorder, n, size int) {
	t.Helper()
	icpt := r.UnaryServerInterceptor(Boundary{Interface: CRI, Caller: "kubelet", Callee: "cri-fake"})
	info := &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/ExecSync"}
	for range n {
		out := make([]byte, size)
		_, err := icpt(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: "c", Cmd: []string{"cat", "big"}}, info,
			func(context.Context, any) (any, error) { return &runtimeapi.ExecSyncResponse{Stdout: out}, nil })
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRingIsBoundedByBytes is issue 17's case at the ring: 40 ExecSync calls answering 15 MB each
// took cri-fake to 1.65 GB, the ring holding every answer. Now an answer past MaxPayload is cut
// when recorded (one past 4 MiB, as here, noted by type and size), the ring stays under its byte
// bound, and the heap after a GC holds no answer. 5 MiB answers keep the test quick under -race;
// cri-fake/server's TestExecSyncFloodStaysBounded makes the 15 MB ones.
func TestRingIsBoundedByBytes(t *testing.T) {
	const calls, size = 40, 5 << 20
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	grown := heapGrowth(func() { execSyncCalls(t, r, calls, size) })
	if r.Bytes() > DefaultMaxBytes {
		t.Fatalf("ring holds %d bytes, bound %d", r.Bytes(), DefaultMaxBytes)
	}
	// What the 40 calls left on the heap: the ring (under 64 MiB) and nothing of the 600 MB.
	if grown > DefaultMaxBytes+(16<<20) {
		t.Fatalf("heap grew by %d MB after %d calls of %d MB", grown>>20, calls, size>>20)
	}
	evs := r.Events()
	if len(evs) == 0 || evs[len(evs)-1].Seq != calls {
		t.Fatalf("the ring lost the newest call: %d events", len(evs))
	}
	for _, ev := range evs {
		if len(ev.Response) > 2*MaxPayload || ev.Truncated == 0 {
			t.Fatalf("event %d: %d response bytes, %d truncated", ev.Seq, len(ev.Response), ev.Truncated)
		}
		var s string
		if json.Unmarshal(ev.Response, &s) != nil || s != fmt.Sprintf("runtime.v1.ExecSyncResponse of %d bytes, not kept", proto.Size(&runtimeapi.ExecSyncResponse{Stdout: make([]byte, size)})) {
			t.Fatalf("event %d: a huge response is a note of its type and size, got %.80s", ev.Seq, ev.Response)
		}
	}
	if r.Bytes() > int64(len(evs))*(3*MaxPayload) {
		t.Fatalf("ring counts %d bytes for %d events", r.Bytes(), len(evs))
	}
	t.Logf("%d calls of %d MiB: %d events kept, %d MiB in the ring, heap +%d MiB", calls, size>>20, len(evs), r.Bytes()>>20,
		grown>>20)
}

// TestLargePayloadIsCutAndMarked: a response past MaxPayload but not huge keeps its start, as a
// JSON string, and says how much was cut.
func TestLargePayloadIsCutAndMarked(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	execSyncCalls(t, r, 1, MaxPayload+MaxPayload/4)
	ev := r.Events()[0]
	var s string
	if json.Unmarshal(ev.Response, &s) != nil || !strings.HasPrefix(s, `{"stdout":"AAAA`) || len(s) > MaxPayload || ev.Truncated == 0 {
		t.Fatalf("response %.40s… (%d bytes), truncated %d", ev.Response, len(ev.Response), ev.Truncated)
	}
	if string(ev.Request) != `{"containerId":"c","cmd":["cat","big"]}` {
		t.Fatalf("the small request was cut: %s", ev.Request)
	}
}

// TestRingDropsOldestPastItsBytes: a byte bound smaller than the count bound drops the oldest.
func TestRingDropsOldestPastItsBytes(t *testing.T) {
	r, err := New(Options{Capacity: 100, MaxBytes: 10 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r.Record(Event{Method: string(rune('a' + i)), Request: json.RawMessage(`"` + strings.Repeat("r", 2000) + `"`)})
	}
	evs := r.Events()
	if len(evs) != 4 || evs[0].Method != "g" || evs[3].Method != "j" || r.Bytes() > 10<<10 {
		t.Fatalf("%d events from %q, %d bytes", len(evs), evs[0].Method, r.Bytes())
	}
	r.Reset()
	if r.Bytes() != 0 {
		t.Fatalf("after Reset: %d bytes", r.Bytes())
	}
}

// TestTraceFileRotates: the --trace file stays under FileMaxBytes, the previous part is kept as
// .1, and ReadFile reads both in order.
func TestTraceFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	const limit = 64 << 10
	r, err := New(Options{File: path, FileMaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		r.Record(Event{Method: "M", Request: json.RawMessage(`"` + strings.Repeat("r", 1000) + `"`)})
	}
	r.Close()
	for _, p := range []string{path, path + ".1"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() > limit {
			t.Fatalf("%s: %v bytes, %v", p, fi.Size(), err)
		}
	}
	evs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("events out of order at %d: %d after %d", i, evs[i].Seq, evs[i-1].Seq)
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Seq != 100 || len(evs) < 64 {
		t.Fatalf("read %d events back", len(evs))
	}
}

// TestReadSurvivesAnyLine: a 70 MB line (a 15 MiB label selector rendered by a recorder before
// payloads were bounded made a 94 MB one) made bufio.Scanner stop with "token too long", losing
// every later event. Read takes it, cuts its payload, and goes on to the next line.
func TestReadSurvivesAnyLine(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a 70 MB line: not with -short or -race (minutes of scanning); go test -run TestReadSurvivesAnyLine ./harness/trace/")
	}
	var b bytes.Buffer
	b.WriteString(`{"seq":1,"method":"Big","request":"`)
	b.Write(bytes.Repeat([]byte("s"), 70<<20))
	b.WriteString("\"}\n{\"seq\":2,\"method\":\"After\"}\n")
	evs, err := Read(&b, "old.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Method != "After" || evs[0].Truncated == 0 || len(evs[0].Request) > 2*MaxPayload {
		t.Fatalf("read %d events; first: %d request bytes, %d truncated", len(evs), len(evs[0].Request), evs[0].Truncated)
	}
}

// TestAppendFileCutsPayloads: cni-fake's writer bounds its lines the same way.
func TestAppendFileCutsPayloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni.jsonl")
	if err := AppendFile(path, Event{Method: "ADD", Request: json.RawMessage(`"` + strings.Repeat("é", MaxPayload) + `"`)}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Size() > 2*MaxPayload {
		t.Fatalf("line of %d bytes", fi.Size())
	}
	evs, err := ReadFile(path)
	if err != nil || len(evs) != 1 || evs[0].Truncated == 0 {
		t.Fatalf("%v %v", evs, err)
	}
}
