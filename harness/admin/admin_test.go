package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

func start(t *testing.T) (*Client, *trace.Recorder, *faults.Set, string) {
	t.Helper()
	rec, _ := trace.New(trace.Options{})
	fs := faults.NewSet(0)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	srv, err := Serve(sock, rec, fs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := NewClient("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec, fs, sock
}

func TestFaultsThroughAdmin(t *testing.T) {
	c, _, fs, _ := start(t)
	ids, err := c.AddFaults(faults.Rule{Method: "PullImage", Code: "Unavailable", Times: 1})
	if err != nil || len(ids) != 1 {
		t.Fatalf("AddFaults = %v, %v", ids, err)
	}
	if _, hit := fs.Check("PullImage", nil); !hit {
		t.Fatal("rule added through the admin socket does not apply")
	}
	if _, err := c.AddFaults(faults.Rule{Method: "X", Code: "Bogus"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad rule: err = %v", err)
	}
	// YAML bodies and faults files are accepted too.
	for _, body := range []string{"method: Version\ncode: Internal\n", "rules:\n- method: Status\n  delay: 1ms\n", `[{"method":"A","code":"NotFound"}]`} {
		resp, err := c.http.Post("http://admin/faults", "application/yaml", strings.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %q: %v %v", body, resp.Status, err)
		}
		resp.Body.Close()
	}
	// The first rule, used up, is still listed with its count.
	rules, err := c.Faults()
	if err != nil || len(rules) != 4 || rules[0].ID != ids[0] || rules[0].Hits != 1 || !rules[0].UsedUp() || rules[1].Method != "Version" {
		t.Fatalf("Faults() = %+v, %v", rules, err)
	}
	if err := c.ClearFaults(); err != nil || len(fs.Rules()) != 0 {
		t.Fatalf("ClearFaults: %v, %d left", err, len(fs.Rules()))
	}
}

func TestTraceThroughAdmin(t *testing.T) {
	c, rec, _, _ := start(t)
	rec.Record(trace.Event{Method: "A"})
	rec.Record(trace.Event{Method: "B"})
	evs, err := c.Trace(1)
	if err != nil || len(evs) != 1 || evs[0].Method != "B" {
		t.Fatalf("Trace(1) = %+v, %v", evs, err)
	}
	// follow: the events recorded after the request arrive on the open response.
	resp, err := c.http.Get("http://admin/trace?follow=1&since=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		time.Sleep(50 * time.Millisecond)
		rec.Record(trace.Event{Method: "C"})
	}()
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var ev trace.Event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Method != "C" {
		t.Fatalf("followed event %s (%v)", line, err)
	}
}

// Follow hands over what the ring holds after since, then each new event as it is recorded, and
// returns when its context ends.
func TestFollow(t *testing.T) {
	c, rec, _, _ := start(t)
	rec.Record(trace.Event{Interface: trace.CRI, Method: "Version", Code: "OK"})
	rec.Record(trace.Event{Interface: trace.CRI, Method: "Status", Code: "OK"})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan trace.Event, 8)
	done := make(chan error, 1)
	go func() { done <- c.Follow(ctx, 1, func(ev trace.Event) { got <- ev }) }()
	if ev := <-got; ev.Method != "Status" || ev.Seq != 2 {
		t.Fatalf("first followed event: %+v, want Status (seq 2): since=1 leaves Version out", ev)
	}
	// Recorded while the stream is open (the subscription is made before the ring is read, so
	// the event is not lost whichever comes first).
	rec.Record(trace.Event{Interface: trace.CRI, Method: "RunPodSandbox", Code: "OK"})
	if ev := <-got; ev.Method != "RunPodSandbox" || ev.Seq != 3 {
		t.Fatalf("followed event: %+v, want RunPodSandbox (seq 3)", ev)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel: %v, want context.Canceled", err)
	}
}

// The socket serves the fake's own Go profiles: a heap profile go tool pprof reads, and a CPU
// profile of the seconds asked for; a POST to them is refused.
func TestProfilesThroughAdmin(t *testing.T) {
	c, _, _, _ := start(t)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.http.Get("http://admin" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Errorf("GET /debug/pprof/heap?debug=1: %d %.200q", code, body)
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine?debug=1: %d %.200q", code, body)
	}
	// A CPU profile is gzipped protobuf: its first bytes are gzip's.
	if code, body := get("/debug/pprof/profile?seconds=1"); code != http.StatusOK || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Errorf("GET /debug/pprof/profile?seconds=1: %d %.50q", code, body)
	}
	resp, err := c.http.Post("http://admin/debug/pprof/heap", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /debug/pprof/heap: %d, want 405", resp.StatusCode)
	}
}
