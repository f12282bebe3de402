package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/localuser"
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

// do makes an API request as the page does: with the view's token in X-Plugsim-UI.
func do(t *testing.T, s *Server, hs *httptest.Server, method, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	req.Header.Set(TokenHeader, s.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// stream reads the page's event stream, handing over each batch's calls.
func stream(t *testing.T, s *Server, hs *httptest.Server) <-chan []Summary {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/events?token="+s.Token(), nil)
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
	calls := stream(t, s, hs)
	// The admin feed follows the fake from the moment it first reaches it (a call recorded before is
	// not replayed): record until the server has seen a call, then a marker, and count from there.
	for seen := false; !seen; {
		rec.Record(trace.Event{Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "Version", Code: "OK"})
		select {
		case b := <-calls:
			seen = len(b) > 0
		case <-time.After(100 * time.Millisecond):
		}
	}
	rec.Record(trace.Event{Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "Status", Code: "OK"})
	until(t, calls, func(s []Summary) bool { return strings.Contains(methods(s), "Status") })
	base := s.Stats()

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
	if st := s.Stats(); st.Received-base.Received != 5 || st.Shown-base.Shown != 4 {
		t.Errorf("stats %+v (before the calls: %+v): want 5 more received (cni-fake's line among them), 4 more shown", st, base)
	}

	// A click's request: the event as the trace holds it.
	resp := do(t, s, hs, http.MethodGet, fmt.Sprintf("/api/events/%d", byMethod["RunPodSandbox"].ID), "")
	var detail struct{ Event trace.Event }
	json.NewDecoder(resp.Body).Decode(&detail)
	resp.Body.Close()
	if !strings.Contains(string(detail.Event.Request), `"name":"web"`) {
		t.Errorf("detail request %s", detail.Event.Request)
	}
	if resp := do(t, s, hs, http.MethodGet, "/api/events/999999", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown call: %s", resp.Status)
	}

	// The SVG export is diagram.SVG of those calls by start time, titled as harness trace titles.
	ids := []uint64{byMethod["PodSandboxStatus"].ID, byMethod["ADD"].ID, byMethod["RunPodSandbox"].ID}
	body, _ := json.Marshal(map[string]any{"ids": ids, "title": "t"})
	resp = do(t, s, hs, http.MethodPost, "/api/export?format=svg", string(body))
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
	resp = do(t, s, hs, http.MethodPost, "/api/export?format=jsonl", string(body))
	back, err := trace.Read(resp.Body, "export")
	resp.Body.Close()
	if err != nil || len(back) != 3 || back[0].Method != "RunPodSandbox" || back[1].Method != "ADD" {
		t.Errorf("the JSON-lines export read back: %d events, %v", len(back), err)
	}
}

// The page adds a rule to the fake it names and lists it with its hits; every API request needs the
// view's token, and another Host (a DNS-rebinding page) is refused.
func TestFaultsAndGuard(t *testing.T) {
	_, fs, ep := fakeWithAdmin(t)
	s, hs := view(t, ep, filepath.Join(t.TempDir(), "cni.jsonl"))
	post := func(path, body string, token string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, token := range []string{"", "1", s.Token()[:31], s.Token() + "0"} {
		if r := post("/api/faults/cri-fake", `{"method":"PullImage","code":"Unavailable","times":1}`, token); r.StatusCode != http.StatusForbidden {
			t.Errorf("a change with token %q: %s, want 403", token, r.Status)
		}
	}
	// Reading needs it as much: the calls, their requests, the rules and their counts.
	for _, p := range []string{"/api/meta", "/api/events", "/api/events/1", "/api/stats", "/api/faults", "/api/events?token=wrong"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without the token: %s, want 403", p, resp.Status)
		}
	}
	if !strings.HasPrefix(s.URL("127.0.0.1:8088"), "http://127.0.0.1:8088/#token=") || len(s.Token()) != 32 {
		t.Errorf("URL %s, token %q: want http://ADDR/#token= and 128 random bits", s.URL("127.0.0.1:8088"), s.Token())
	}
	if New(Options{}).Token() == s.Token() {
		t.Error("two views got the same token")
	}
	if r := post("/api/faults/cri-fake", `{"method":"PullImage","code":"Unavailable","times":1}`, s.Token()); r.StatusCode != http.StatusOK {
		t.Fatalf("add a rule: %s", r.Status)
	}
	if _, hit := fs.Check("PullImage", nil); !hit {
		t.Error("the rule added through the view does not apply")
	}
	for body, want := range map[string]int{`{"method":"PullImage","code":"NoSuchCode"}`: 400, `{"method":"PullImage","bogus":1}`: 400, `not json`: 400} {
		if r := post("/api/faults/cri-fake", body, s.Token()); r.StatusCode != want {
			t.Errorf("POST %s: %s, want %d", body, r.Status, want)
		}
	}
	if r := post("/api/faults/nobody", `{"method":"X"}`, s.Token()); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown target: %s", r.Status)
	}
	resp := do(t, s, hs, http.MethodGet, "/api/faults", "")
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
	req.Header.Set(TokenHeader, s.Token())
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

// Issue 24, 2: another local user reaches any loopback port. Without the view's token, which only the
// URL printed to the starting user carries, they can neither add the per-character "silent" rules that
// read a password back through their counts, nor list the rules, nor read a call or the stream.
func TestAnotherUserCannotUseTheView(t *testing.T) {
	u := localuser.New(t)
	_, fs, ep := fakeWithAdmin(t)
	_, hs := view(t, ep, filepath.Join(t.TempDir(), "cni.jsonl"))
	out, err := u.TestCommand(t, "TestOtherUsersRequests", "PLUGSIM_VIEW="+hs.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("the other user's requests: %v\n%s", err, out)
	}
	for _, want := range []string{"POST /api/faults/cri-fake: 403", "GET /api/faults: 403", "GET /api/events/1: 403", "GET /api/events: 403", "GET /api/meta: 403"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("as %s: want %q in\n%s", u, want, out)
		}
	}
	if rs := fs.Rules(); len(rs) != 0 {
		t.Errorf("the other user added rules: %+v", rs)
	}
}

// The other user's side of TestAnotherUserCannotUseTheView, run as that user.
func TestOtherUsersRequests(t *testing.T) {
	if !localuser.Helper(t.Name()) {
		return
	}
	base := os.Getenv("PLUGSIM_VIEW")
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/faults/cri-fake", `{"method":"PullImage","match":{"auth.password":"??c*"},"after":1000000000,"code":"Unavailable"}`},
		{"GET", "/api/faults", ""}, {"GET", "/api/events/1", ""}, {"GET", "/api/events", ""}, {"GET", "/api/meta", ""},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
		req.Header.Set(TokenHeader, "1") // what the page sent before, and what the user sent
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%s %s: %d\n", r.method, r.path, resp.StatusCode)
	}
}

// Issue 24, 4: 1,000 event streams that never read took the view to 1.39 GB. It serves MaxClients
// streams at once; a stream whose reader stopped has at most maxClientQueueBytes queued, and is dropped
// once a write has blocked for WriteTimeout.
func TestEventStreamsAreBounded(t *testing.T) {
	// A view with ~50 MB of summaries in its backlog (more than a socket's buffers hold), and a reader
	// that sends its request and never reads.
	stalled := func(writeTimeout time.Duration) (*Server, func(n int)) {
		s := New(Options{Capacity: 5000, MaxBytes: 1 << 30, Backlog: 5000, WriteTimeout: writeTimeout})
		big := func(n int) {
			for i := range n {
				s.receive("f", trace.Event{Time: time.Now(), Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "Version", Code: "Unknown", Error: fmt.Sprint(i) + strings.Repeat("e", 8<<10)})
			}
			s.flush(time.Now())
		}
		big(3000)
		hs := httptest.NewServer(s.Handler("127.0.0.1:0"))
		t.Cleanup(hs.Close)
		conn, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /api/events?token=%s HTTP/1.1\r\nHost: %s\r\n\r\n", s.Token(), hs.Listener.Addr())
		waitFor(t, "the stream registered", func() bool { return s.Stats().Clients == 1 })
		return s, big
	}

	// Batches for it pile up to the byte bound, then are counted lost (the write deadline is far off).
	s, big := stalled(time.Hour)
	for range 20 {
		big(100)
	}
	s.mu.Lock()
	for c := range s.clients {
		if q := c.queued.Load(); q > maxClientQueueBytes {
			t.Errorf("%d bytes queued for a page that does not read, more than %d", q, maxClientQueueBytes)
		}
	}
	s.mu.Unlock()
	if st := s.Stats(); st.Lost == 0 || st.Clients != 1 {
		t.Errorf("stats %+v: want the page that does not read still connected, and calls counted lost for it", st)
	}

	// A write that blocks past WriteTimeout drops the stream.
	s, _ = stalled(200 * time.Millisecond)
	waitFor(t, "the stream that does not read dropped", func() bool { return s.Stats().Clients == 0 })

	// At most MaxClients at once.
	s = New(Options{})
	hs := httptest.NewServer(s.Handler("127.0.0.1:0"))
	defer hs.Close()
	var bodies []io.Closer
	defer func() {
		for _, b := range bodies {
			b.Close()
		}
	}()
	for i := range MaxClients + 1 {
		resp, err := http.Get(hs.URL + "/api/events?token=" + s.Token())
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		want := http.StatusOK
		if i == MaxClients {
			want = http.StatusServiceUnavailable
		}
		if resp.StatusCode != want {
			t.Fatalf("stream %d: %s, want %d", i+1, resp.Status, want)
		}
	}
}

// Issue 24, 4: an export naming one 1 MB call 2,000 times returned 2.1 GB. Each call is exported once,
// and a list longer than the ring is refused.
func TestExportIsBounded(t *testing.T) {
	s := New(Options{Capacity: 100})
	s.receive("f", trace.Event{Time: time.Now(), Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "RunPodSandbox", Code: "OK", Request: json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)})
	s.flush(time.Now())
	hs := httptest.NewServer(s.Handler("127.0.0.1:0"))
	defer hs.Close()
	ids := make([]uint64, 2000)
	for i := range ids {
		ids[i] = 1
	}
	body, _ := json.Marshal(map[string]any{"ids": ids[:100]})
	resp := do(t, s, hs, http.MethodPost, "/api/export?format=jsonl", string(body))
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n > 2<<20 {
		t.Errorf("export of one 1 MB call named 100 times: %s, %d bytes; want it once", resp.Status, n)
	}
	body, _ = json.Marshal(map[string]any{"ids": ids})
	if resp := do(t, s, hs, http.MethodPost, "/api/export?format=jsonl", string(body)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("2,000 ids for a view of 100 calls: %s, want 400", resp.Status)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
	}
}

// cni-fake's line of an ADD cri-fake ran waits for cri-fake's record of the whole chain, which comes
// only once portmap has returned: on a loaded machine more than two seconds later, and the ADD was
// then drawn twice (once alone, before its RunPodSandbox). It is folded whenever the record comes; a
// line no record will come for (a scenario's own CNI step) is shown after two seconds.
func TestPluginLineWaitsForItsChain(t *testing.T) {
	s := New(Options{})
	t0 := time.Now()
	self := trace.Event{Time: t0, Interface: trace.CNI, Caller: "cri-fake", Callee: "cni-fake", Service: "cni-fake", Method: "ADD", Code: "OK", Attrs: map[string]string{"containerID": "sb1"}}
	own := trace.Event{Time: t0, Interface: trace.CNI, Caller: "harness", Callee: "cni-fake", Service: "cni-fake", Method: "CHECK", Code: "OK", Attrs: map[string]string{"containerID": "sb2"}}
	chain := trace.Event{Time: t0, Interface: trace.CNI, Caller: "cri-fake", Callee: "plugsim", Service: "cni-fake,portmap", Method: "ADD", Code: "OK", Attrs: map[string]string{"containerID": "sb1"}}
	s.receive("cni", self)
	s.receive("cni", own)
	s.flush(t0)
	s.flush(t0.Add(5 * time.Second)) // portmap still running
	if st := s.Stats(); st.Shown != 1 || len(s.ring) != 1 || s.ring[0].ev.Method != "CHECK" {
		t.Fatalf("after 5 s: %+v, %d held; want only the scenario's CHECK shown", st, len(s.held))
	}
	s.receive("cri", chain)
	s.flush(t0.Add(6 * time.Second))
	s.flush(t0.Add(2 * time.Minute))
	var adds int
	for _, st := range s.ring {
		if st.ev.Method == "ADD" {
			adds++
			if st.ev.Service != "cni-fake,portmap" {
				t.Errorf("the ADD drawn is %+v, want the chain's record", st.ev)
			}
		}
	}
	if adds != 1 || len(s.held) != 0 {
		t.Errorf("ADD drawn %d times, %d lines still held; want once, none", adds, len(s.held))
	}
}
