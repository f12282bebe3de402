//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/harness/ui"
	"github.com/plugsim/plugsim/harness/wiring"
	"github.com/plugsim/plugsim/internal/testbin"
)

// procStatus returns a process's VmRSS and VmHWM (its peak) in MiB, and its CPU time (user and
// system) in seconds.
func procStatus(t *testing.T, pid int) (rss, hwm, cpu float64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseFloat(f[1], 64)
			if f[0] == "VmRSS:" {
				rss = kb / 1024
			} else {
				hwm = kb / 1024
			}
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return rss, hwm, (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// The reproductions of issue 24, 4 against `harness up --ui`, each with the node's memory and CPU
// logged before and after (harness/README.md quotes them): 12 fault rules with a 1 MB match string, a
// rule naming a 1 MB method, three 1 MB cni-fake rules and a CNI ADD after them, an export naming one
// 1 MB call 2,000 times, and 1,000 event streams that never read while `harness kubelet --pods N`
// (PLUGSIM_UI_BOUNDS_PODS, default 200) drives the node. Each is refused or contained.
func TestTheViewUnderTheIssuesLoad(t *testing.T) {
	pods := os.Getenv("PLUGSIM_UI_BOUNDS_PODS")
	if pods == "" {
		pods = "200"
	}
	dir := t.TempDir()
	base, token := baseAndToken(upWithUI(t, dir))
	st, err := wiring.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	pid := st.PID
	api := func(method, path, body string) (*http.Response, error) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set(ui.TokenHeader, token)
		return http.DefaultClient.Do(req)
	}
	status := func(method, path, body string) (int, string) {
		resp, err := api(method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	rss0, _, _ := procStatus(t, pid)
	t.Logf("node with the view up: RSS %.0f MiB", rss0)

	// 12 rules with a 1 MB match string.
	mb := strings.Repeat("?", 1_000_000)
	rule, _ := json.Marshal(map[string]any{"method": "PullImage", "match": map[string]string{"image.image": mb}, "code": "Unavailable"})
	accepted := 0
	for range 12 {
		if code, _ := status("POST", "/api/faults/cri-fake", string(rule)); code == http.StatusOK {
			accepted++
		}
	}
	rss1, _, cpu1 := procStatus(t, pid)
	t.Logf("12 rules with a 1 MB match string: %d accepted; RSS %.0f → %.0f MiB", accepted, rss0, rss1)
	if accepted != 0 {
		t.Errorf("%d rules with a 1 MB match string accepted", accepted)
	}

	// A 1 MB unknown method name (the did-you-mean search).
	rule, _ = json.Marshal(map[string]any{"method": strings.Repeat("x", 1_000_000), "code": "Unavailable"})
	code, msg := status("POST", "/api/faults/cri-fake", string(rule))
	_, _, cpu2 := procStatus(t, pid)
	t.Logf("a rule naming a 1 MB method: %d %.80q; the node's CPU time %.2f s", code, msg, cpu2-cpu1)
	if code == http.StatusOK {
		t.Error("a rule naming a 1 MB method was accepted")
	}

	// Three 1 MB cni-fake rules, then a pod through the CNI chain.
	rule, _ = json.Marshal(map[string]any{"verb": "ADD", "match": map[string]string{"CNI_CONTAINERID": strings.Repeat("x", 1_000_000)}, "code": 11})
	accepted = 0
	for range 3 {
		if code, _ := status("POST", "/api/faults/cni-fake", string(rule)); code == http.StatusOK {
			accepted++
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, "etc/cni/faults.json"))
	out, exit := run(t, "run", "--dir", dir, "examples/scenarios/01-pod-lifecycle.yaml")
	t.Logf("three 1 MB cni-fake rules: %d accepted, faults file %d bytes; a pod's CNI ADD after them: exit %d", accepted, fi.Size(), exit)
	if accepted != 0 || exit != 0 {
		t.Errorf("cni-fake rules accepted %d, then the pod lifecycle exit %d:\n%s", accepted, exit, lastLines(out, 5))
	}
	status("DELETE", "/api/faults/cni-fake", "")

	// One 1 MB call, exported 2,000 times over.
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, []byte("name: a 1 MB image name\nsteps:\n  - interface: cri\n    call: PullImage\n    request: {image: {image: \"big-"+strings.Repeat("x", 1000_000)+"\"}}\n    expect: {code: NotFound}\n"), 0o644)
	if out, exit := run(t, "run", "--dir", dir, big); exit != 0 {
		t.Logf("the 1 MB PullImage: exit %d (its code does not matter)\n%s", exit, lastLines(out, 3))
	}
	// The scenarios' pulls succeed; the 1 MB one does not.
	id := findCall(t, base, token, func(c ui.Summary) bool { return c.Method == "PullImage" && c.Code != "OK" })
	export := func(times int) (string, int64) {
		ids := make([]uint64, times)
		for i := range ids {
			ids[i] = id
		}
		body, _ := json.Marshal(map[string]any{"ids": ids})
		resp, err := api("POST", "/api/export?format=jsonl", string(body))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status, n
	}
	_, once := export(1)
	st2000, n := export(2000)
	rss3, hwm3, _ := procStatus(t, pid)
	t.Logf("an export naming the 1 MB call (%d bytes exported once) 2,000 times: %s, %d bytes; RSS %.0f MiB (peak %.0f)", once, st2000, n, rss3, hwm3)
	if n != once {
		t.Errorf("the export of 2,000 copies is %d bytes, the call's export %d", n, once)
	}

	// 1,000 event streams that never read, while the kubelet simulation drives the node.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	host := strings.TrimPrefix(base, "http://")
	refused := 0
	for range 1000 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /api/events?token=%s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\n\r\n", token, host, ui.TokenHeader, token)
	}
	kubelet := exec.Command(testbin.Path(t, "harness"), "kubelet", "--dir", dir, "--pods", pods, "--concurrency", "16")
	kubelet.Dir = repoRoot(t)
	kout, kerr := kubelet.CombinedOutput()
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if l, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.Contains(l, " 503 ") {
			refused++
		}
	}
	rss4, hwm4, _ := procStatus(t, pid)
	t.Logf("1,000 event streams that never read, during `harness kubelet --pods %s --concurrency 16` (%v: %s): %d refused (503); RSS %.0f MiB, peak %.0f MiB",
		pods, kerr, summaryLine(string(kout)), refused, rss4, hwm4)
	if refused < 1000-ui.MaxClients {
		t.Errorf("%d of 1,000 streams refused, want all but %d", refused, ui.MaxClients)
	}
}

// findCall reads the view's stream until a call for which want holds shows up, and returns its id.
func findCall(t *testing.T, base, token string, want func(ui.Summary) bool) uint64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/events?token="+token, nil)
	req.Header.Set(ui.TokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	found := make(chan uint64, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var env struct{ Calls []ui.Summary }
			json.Unmarshal([]byte(data), &env)
			for _, c := range env.Calls {
				if want(c) {
					found <- c.ID
					return
				}
			}
		}
	}()
	select {
	case id := <-found:
		return id
	case <-time.After(2 * time.Minute):
		t.Fatal("the call was not in the view's stream")
	}
	return 0
}

// summaryLine is the line of `harness kubelet`'s output that sums the run up.
func summaryLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "pods: ") {
			return l
		}
	}
	return lastLines(out, 2)
}

// Issue 24, 2: a silent rule per guess of the password's first character, added through the view, and
// the matched counts read back, recovered a `crictl pull --creds` password. Rules now see the request
// as the trace shows it: every guess matches nothing, and the one pattern that matches is the
// redaction itself.
func TestRulesCannotReadACrictlPassword(t *testing.T) {
	dir := t.TempDir()
	base, token := baseAndToken(upWithUI(t, dir))
	api := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set(ui.TokenHeader, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	guesses := []string{"a*", "p*", "s*", "s3*", "s3cret"}
	for _, g := range append(guesses, "\\*\\*\\*stripped\\*\\*\\*") {
		rule, _ := json.Marshal(map[string]any{"method": "PullImage", "match": map[string]string{"auth.password": g}, "after": 1_000_000_000, "code": "Unavailable"})
		if resp := api("POST", "/api/faults/cri-fake", string(rule)); resp.StatusCode != http.StatusOK {
			t.Fatalf("add the rule for %q: %s", g, resp.Status)
		}
	}
	crictl := exec.Command(testbin.Path(t, "crictl"), "--config", filepath.Join(dir, "crictl.yaml"), "pull", "--creds", "alice:s3cret", "busybox")
	if out, err := crictl.CombinedOutput(); err != nil {
		t.Fatalf("crictl pull --creds: %v\n%s", err, out)
	}
	resp := api("GET", "/api/faults", "")
	var list struct {
		Targets []struct {
			Name  string
			Rules []struct {
				Match   map[string]string
				Matched int
			}
		}
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	for _, tg := range list.Targets {
		if tg.Name != "cri-fake" {
			continue
		}
		if len(tg.Rules) != len(guesses)+1 {
			t.Fatalf("cri-fake lists %d rules, want %d", len(tg.Rules), len(guesses)+1)
		}
		for i, r := range tg.Rules {
			want := 0
			if i == len(guesses) {
				want = 1 // what the trace shows: ***stripped***
			}
			if r.Matched != want {
				t.Errorf("the rule matching auth.password %q matched %d pulls, want %d", r.Match["auth.password"], r.Matched, want)
			}
		}
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "var/log/plugsim/cri.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Method == "PullImage" && (strings.Contains(string(ev.Request), "s3cret") || !strings.Contains(string(ev.Request), trace.Redacted)) {
			t.Errorf("the trace's PullImage request: %s", ev.Request)
		}
	}
}

// baseAndToken splits the view's printed URL into its address and its token. A view from before the
// token (the "before" runs of these reproductions) gets the header value it wanted.
func baseAndToken(url string) (base, token string) {
	base, token, _ = strings.Cut(url, "/#token=")
	if token == "" {
		token = "1"
	}
	return strings.TrimSuffix(base, "/"), token
}
