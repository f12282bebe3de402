package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

// fakeWithAdmin is a recorder and a fault set behind an admin socket, as cri-fake serves them.
func fakeWithAdmin(t *testing.T) (*trace.Recorder, *faults.Set, string) {
	t.Helper()
	rec, err := trace.New(trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := faults.NewSet(0)
	ep := "unix://" + filepath.Join(t.TempDir(), "admin.sock")
	srv, err := admin.Serve(ep, rec, fs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return rec, fs, ep
}

// view starts a Server over the admin socket and the CNI log, and an HTTP test server on it.
func view(t *testing.T, ep, cniLog string) (*Server, *httptest.Server) {
	t.Helper()
	c, err := admin.NewClient(ep)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{From: "the test", Feeds: []Feed{&AdminFeed{FeedName: "cri-fake", Endpoint: ep}, &FileFeed{FeedName: "cni-fake", Path: cniLog, Poll: 10 * time.Millisecond}},
		Faults: []FaultTarget{{Name: "cri-fake", Rules: c}}, FlushEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	hs := httptest.NewServer(s.Handler("127.0.0.1:0"))
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	return s, hs
}

// stream reads the page's event stream, handing over each batch's calls.
func stream(t *testing.T, hs *httptest.Server) <-chan []Summary {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/events", nil)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	out := make(chan []Summary, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var env envelope
				if json.Unmarshal([]byte(data), &env) == nil && len(env.Calls) > 0 {
					out <- env.Calls
				}
			}
		}
	}()
	return out
}

// until reads batches until have holds the calls wanted.
func until(t *testing.T, ch <-chan []Summary, done func([]Summary) bool) []Summary {
	t.Helper()
	var all []Summary
	for !done(all) {
		select {
		case b := <-ch:
			all = append(all, b...)
		case <-time.After(2 * time.Minute):
			t.Fatalf("the stream stopped with %d calls: %+v", len(all), all)
		}
	}
	return all
}

func methods(s []Summary) string {
	var m []string
	for _, c := range s {
		m = append(m, c.Method)
	}
	return strings.Join(m, " ")
}

// What crossed the boundaries reaches the page in the order the calls started, cni-fake's own line
// of an ADD folded into the runtime's record of the chain, each call with the pod it concerned;
// the page can then read a call's request, and export what it shows as diagram.SVG draws it.
func TestStreamFoldAndExport(t *testing.T) {
	rec, _, ep := fakeWithAdmin(t)
	cniLog := filepath.Join(t.TempDir(), "cni.jsonl")
	s, hs := view(t, ep, cniLog)
	calls := stream(t, hs)
	// The feeds reach the fake first: wait until the server has seen one call.
	rec.Record(trace.Event{Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "Version", Code: "OK"})
	until(t, calls, func(s []Summary) bool { return len(s) == 1 })

	t0 := time.Now()
	sandbox := "5b1e3f"
	run := trace.Event{Time: t0, Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Service: "runtime.v1.RuntimeService", Method: "RunPodSandbox", Code: "OK", DurationNS: int64(30 * time.Millisecond),
		Request:  json.RawMessage(`{"config":{"metadata":{"name":"web","namespace":"default","uid":"u1"}}}`),
		Response: json.RawMessage(`{"podSandboxId":"` + sandbox + `"}`)}
	chain := trace.Event{Time: t0.Add(time.Millisecond), Interface: trace.CNI, Caller: "cri-fake", Callee: "plugsim", Service: "cni-fake,portmap", Method: "ADD", Code: "OK", Attrs: map[string]string{"containerID": sandbox}}
	self := trace.Event{Time: t0.Add(2 * time.Millisecond), Interface: trace.CNI, Caller: "cri-fake", Callee: "cni-fake", Service: "cni-fake", Method: "ADD", Code: "OK", Attrs: map[string]string{"containerID": sandbox}}
	// cri-fake records the chain before the RunPodSandbox that ran it returns; cni-fake's own line
	// is in its log file.
	rec.Record(chain)
	if err := trace.AppendFile(cniLog, self); err != nil {
		t.Fatal(err)
	}
	rec.Record(run)
	status := trace.Event{Time: t0.Add(40 * time.Millisecond), Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "PodSandboxStatus", Code: "NotFound", Error: "no sandbox",
		Request: json.RawMessage(`{"podSandboxId":"` + sandbox + `"}`)}
	rec.Record(status)
	// A scenario's own CNI call has no chain record: its line is shown once it has waited.
	own := trace.Event{Time: t0.Add(50 * time.Millisecond), Interface: trace.CNI, Caller: "harness", Callee: "cni-fake", Service: "cni-fake", Method: "CHECK", Code: "OK", Attrs: map[string]string{"containerID": "other"}}
	if err := trace.AppendFile(cniLog, own); err != nil {
		t.Fatal(err)
	}
	all := until(t, calls, func(s []Summary) bool { return strings.Contains(methods(s), "CHECK") })
	if got := methods(all); strings.Count(got, "ADD") != 1 || !strings.Contains(got, "PodSandboxStatus") {
		t.Fatalf("calls streamed: %s; want one ADD (cni-fake's own line folded into the chain's)", got)
	}
	byMethod := map[string]Summary{}
	for _, c := range all {
		byMethod[c.Method] = c
	}
	add := byMethod["ADD"]
	if add.From != "cri-fake" || add.To != "cni-fake" || strings.Join(add.Chain, ",") != "portmap" || add.Pod != "default/web" {
		t.Errorf("the ADD: %+v; want cri-fake → cni-fake → portmap for pod default/web", add)
	}
	if st := byMethod["PodSandboxStatus"]; st.Pod != "default/web" || st.Sandbox != sandbox || !st.Poll || st.Code != "NotFound" {
		t.Errorf("the status poll: %+v; want pod default/web by its sandbox, marked housekeeping, NotFound", st)
	}
	if st := s.Stats(); st.Received != 6 || st.Shown != 5 {
		t.Errorf("stats %+v: want 6 received (cni-fake's line among them), 5 shown", st)
	}

	// A click's request: the event as the trace holds it.
	resp, err := http.Get(fmt.Sprintf("%s/api/events/%d", hs.URL, byMethod["RunPodSandbox"].ID))
	if err != nil {
		t.Fatal(err)
	}
	var detail struct{ Event trace.Event }
	json.NewDecoder(resp.Body).Decode(&detail)
	resp.Body.Close()
	if !strings.Contains(string(detail.Event.Request), `"name":"web"`) {
		t.Errorf("detail request %s", detail.Event.Request)
	}
	if resp, _ := http.Get(hs.URL + "/api/events/999999"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown call: %s", resp.Status)
	}

	// The SVG export is diagram.SVG of those calls by start time, titled as harness trace titles.
	ids := []uint64{byMethod["PodSandboxStatus"].ID, byMethod["ADD"].ID, byMethod["RunPodSandbox"].ID}
	body, _ := json.Marshal(map[string]any{"ids": ids, "title": "t"})
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/export?format=svg", strings.NewReader(string(body)))
	req.Header.Set("X-Plugsim-UI", "1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	svg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.mu.Lock()
	var evs []trace.Event
	for _, id := range []uint64{byMethod["RunPodSandbox"].ID, byMethod["ADD"].ID, byMethod["PodSandboxStatus"].ID} {
		st, _ := s.find(id)
		evs = append(evs, st.ev)
	}
	s.mu.Unlock()
	if want := diagram.SVG("t", "3 calls from the test", []diagram.Section{{Events: evs}}); string(svg) != string(want) {
		t.Errorf("the SVG export is not diagram.SVG of the calls:\n%.500s\n---\n%.500s", svg, want)
	}
	req, _ = http.NewRequest(http.MethodPost, hs.URL+"/api/export?format=jsonl", strings.NewReader(string(body)))
	req.Header.Set("X-Plugsim-UI", "1")
	resp, _ = http.DefaultClient.Do(req)
	back, err := trace.Read(resp.Body, "export")
	resp.Body.Close()
	if err != nil || len(back) != 3 || back[0].Method != "RunPodSandbox" || back[1].Method != "ADD" {
		t.Errorf("the JSON-lines export read back: %d events, %v", len(back), err)
	}
}

// The page adds a rule to the fake it names and lists it with its hits; changes need the page's
// header, and another Host (a DNS-rebinding page) is refused.
func TestFaultsAndGuard(t *testing.T) {
	_, fs, ep := fakeWithAdmin(t)
	_, hs := view(t, ep, filepath.Join(t.TempDir(), "cni.jsonl"))
	post := func(path, body string, header bool) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
		if header {
			req.Header.Set("X-Plugsim-UI", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post("/api/faults/cri-fake", `{"method":"PullImage","code":"Unavailable","times":1}`, false); r.StatusCode != http.StatusForbidden {
		t.Errorf("a change without X-Plugsim-UI: %s, want 403", r.Status)
	}
	if r := post("/api/faults/cri-fake", `{"method":"PullImage","code":"Unavailable","times":1}`, true); r.StatusCode != http.StatusOK {
		t.Fatalf("add a rule: %s", r.Status)
	}
	if _, hit := fs.Check("PullImage", nil); !hit {
		t.Error("the rule added through the view does not apply")
	}
	for body, want := range map[string]int{`{"method":"PullImage","code":"NoSuchCode"}`: 400, `{"method":"PullImage","bogus":1}`: 400, `not json`: 400} {
		if r := post("/api/faults/cri-fake", body, true); r.StatusCode != want {
			t.Errorf("POST %s: %s, want %d", body, r.Status, want)
		}
	}
	if r := post("/api/faults/nobody", `{"method":"X"}`, true); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown target: %s", r.Status)
	}
	resp, _ := http.Get(hs.URL + "/api/faults")
	var list struct {
		Targets []struct {
			Name  string
			Rules []faults.Rule
		}
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Targets) != 1 || len(list.Targets[0].Rules) != 1 || list.Targets[0].Rules[0].Hits != 1 {
		t.Errorf("rules listed: %+v, want the one rule with 1 hit", list)
	}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/meta", nil)
	req.Host = "attacker.example:80"
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host attacker.example: %s, want 403", resp.Status)
	}
	for _, p := range []string{"/", "/app.js", "/app.css"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %v %v", p, resp.Status, err)
		}
		resp.Body.Close()
	}
}

// The ring keeps the newest calls within both bounds.
func TestRingBounds(t *testing.T) {
	s := New(Options{Capacity: 10, MaxBytes: 10 * 1024})
	for i := range 1000 {
		ev := trace.Event{Interface: trace.CRI, Method: "Version", Code: "OK", Request: json.RawMessage(`"` + strings.Repeat("x", i%3*1000) + `"`)}
		s.nextID++
		s.store(stored{sum: Summary{ID: s.nextID}, ev: ev, size: eventSize(ev)})
		if len(s.ring) > 10 || (s.bytes > 10*1024 && len(s.ring) > 1) {
			t.Fatalf("after %d calls the ring holds %d calls, %d bytes", i+1, len(s.ring), s.bytes)
		}
	}
	if st, ok := s.find(1000); !ok || st.sum.ID != 1000 {
		t.Error("the newest call is not held")
	}
	if _, ok := s.find(1); ok {
		t.Error("the oldest call is still held")
	}
	if cap(s.ring) > 2*10+10 {
		t.Errorf("the ring's array grew to %d", cap(s.ring))
	}
}

func TestListenRefusesRemote(t *testing.T) {
	if _, _, err := Listen("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "--allow-remote") {
		t.Errorf("0.0.0.0 without --allow-remote: %v", err)
	}
	l, warning, err := Listen("0.0.0.0:0", true)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if !strings.Contains(warning, "warning") {
		t.Errorf("no warning for a non-loopback address: %q", warning)
	}
	l, warning, err = Listen("127.0.0.1:0", false)
	if err != nil || warning != "" {
		t.Errorf("loopback: %v %q", err, warning)
	}
	l.Close()
}
