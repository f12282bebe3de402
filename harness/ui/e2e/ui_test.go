//go:build e2e

// Package e2e opens the live boundary view in headless Chromium against a node `harness up --ui`
// keeps, drives the node with the harness binary, and checks what the page's DOM shows: calls in
// order, a call's request JSON on a click, filters, following a pod, a fault rule added from the
// form failing the next call, the SVG export being harness trace's drawing; and it measures the
// page under `harness kubelet` load. The binaries come from $PLUGSIM_BIN (`make build`); Chromium
// is Debian's (`make deps`); without it the tests skip and say so.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/plugsim/plugsim/harness/ui"
	"github.com/plugsim/plugsim/harness/ui/browsertest"
	"github.com/plugsim/plugsim/harness/wiring"
	"github.com/plugsim/plugsim/internal/localuser"
	"github.com/plugsim/plugsim/internal/testbin"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// upWithUI starts `harness up --dir DIR --ui 127.0.0.1:0` and returns the page's URL; the node
// stops with the test.
func upWithUI(t *testing.T, dir string) string {
	t.Helper()
	bin := testbin.Dir(t, "harness", "cni-fake")
	return browsertest.StartView(t, exec.Command(filepath.Join(bin, "harness"), "up", "--dir", dir, "--follow=false", "--ui", "127.0.0.1:0"))
}

// run runs the harness binary from the repository root and returns its output and exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testbin.Path(t, "harness"), args...)
	cmd.Dir = repoRoot(t)
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(b), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("harness %v: %v", args, err)
	}
	return string(b), 0
}

// inOrder reports whether want is a subsequence of got.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// setFilter sets a filter control the way a user does, firing its event.
func setFilter(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	ev := "input"
	if id == "filter-iface" || id == "show-housekeeping" {
		ev = "change"
	}
	browsertest.Eval[chromedp.Void](t, ctx, fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q; e.dispatchEvent(new Event(%q)); })()`, id, value, ev))
}

// The pod lifecycle scenario, watched in the page while it runs.
func TestPodLifecycleInTheBrowser(t *testing.T) {
	browsertest.Chromium(t)
	dir := t.TempDir()
	url := upWithUI(t, dir)
	ctx := browsertest.Open(t, url)

	if out, code := run(t, "run", "--dir", dir, "examples/scenarios/01-pod-lifecycle.yaml"); code != 0 {
		t.Fatalf("harness run 01: exit %d\n%s", code, out)
	}
	// The kubelet's order, with the runtime's CNI ADD after the RunPodSandbox that ran it and the
	// DEL after StopPodSandbox: housekeeping (Version, Status, the status polls) is folded away.
	lifecycle := []string{"RunPodSandbox", "ADD", "PullImage", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer", "StopPodSandbox", "DEL", "RemovePodSandbox"}
	browsertest.WaitFor(t, ctx, `[...document.querySelectorAll('#rows .call')].some(r => r.dataset.method === 'RemovePodSandbox')`, "RemovePodSandbox drawn")
	got := browsertest.Methods(t, ctx)
	if !inOrder(got, lifecycle) {
		t.Fatalf("calls drawn: %v; want %v in this order", got, lifecycle)
	}
	for _, m := range got {
		if m == "Version" || m == "Status" || m == "PodSandboxStatus" {
			t.Errorf("housekeeping call %s drawn while folded: %v", m, got)
		}
	}
	if n := browsertest.Eval[int](t, ctx, `Number(document.getElementById('count-housekeeping').textContent)`); n < 3 {
		t.Errorf("housekeeping counter %d, want the Version, Status and status polls counted", n)
	}
	lanes := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#lanes .lane')].map(l => l.dataset.lane)`)
	if l := strings.Join(lanes, ","); l != "kubelet,cri-fake,cni-fake" && l != "kubelet,cri-fake,cni-fake,portmap" {
		t.Errorf("lanes %v, want kubelet, cri-fake, cni-fake (→ portmap, when chained)", lanes)
	}
	browsertest.Screenshot(t, ctx, "ui-pod-lifecycle")

	// A click shows the request as the trace holds it.
	browsertest.Click(t, ctx, `#rows .call[data-method="RunPodSandbox"]`)
	browsertest.WaitFor(t, ctx, `document.getElementById('detail-request').textContent.includes('"metadata"')`, "RunPodSandbox's request shown")
	req := browsertest.Eval[string](t, ctx, `document.getElementById('detail-request').textContent`)
	for _, s := range []string{`"name": "web"`, `"namespace": "default"`} {
		if !strings.Contains(req, s) {
			t.Errorf("request JSON lacks %s:\n%s", s, req)
		}
	}
	if resp := browsertest.Eval[string](t, ctx, `document.getElementById('detail-response').textContent`); !strings.Contains(resp, `"podSandboxId"`) {
		t.Errorf("response JSON lacks podSandboxId:\n%s", resp)
	}
	browsertest.Screenshot(t, ctx, "ui-call-detail")

	// Following the pod: its CRI calls, status polls included, and its CNI ADD and DEL; no
	// runtime-wide call such as Version.
	browsertest.Click(t, ctx, `#follow`)
	browsertest.WaitFor(t, ctx, `!document.getElementById('follow-banner').hidden`, "the follow banner")
	followed := browsertest.Methods(t, ctx)
	// (The scenario's PullImage names no sandbox config, so no pod: it is not the pod's.)
	podCalls := []string{"RunPodSandbox", "ADD", "PodSandboxStatus", "CreateContainer", "StartContainer", "ContainerStatus", "StopContainer", "RemoveContainer", "StopPodSandbox", "DEL", "RemovePodSandbox"}
	if !inOrder(followed, podCalls) || strings.Contains(strings.Join(followed, ","), "Version") || strings.Contains(strings.Join(followed, ","), "PullImage") {
		t.Errorf("following pod default/web drew %v", followed)
	}
	browsertest.Click(t, ctx, `#unfollow`)

	// The interface filter hides everything but CNI.
	setFilter(t, ctx, "filter-iface", "CNI")
	browsertest.WaitFor(t, ctx, `[...document.querySelectorAll('#rows .call')].every(r => r.dataset.iface === 'CNI')`, "only CNI rows")
	if got := browsertest.Methods(t, ctx); strings.Join(got, ",") != "ADD,DEL" {
		t.Errorf("with interface CNI the page draws %v, want ADD, DEL", got)
	}
	setFilter(t, ctx, "filter-iface", "")
	setFilter(t, ctx, "filter-method", "container")
	browsertest.WaitFor(t, ctx, `[...document.querySelectorAll('#rows .call')].every(r => r.dataset.method.toLowerCase().includes('container'))`, "only *Container* rows")
	setFilter(t, ctx, "filter-method", "")

	// The export is harness trace's drawing of the same calls: the JSON-lines export, drawn by
	// `harness trace --svg` with the same title, is the same picture but for the subtitle naming
	// the source.
	browsertest.Click(t, ctx, `#export-jsonl`)
	browsertest.WaitFor(t, ctx, `window.plugsimLastExport && window.plugsimLastExport.format === 'jsonl'`, "the JSON-lines export")
	jsonl := browsertest.Eval[string](t, ctx, `window.plugsimLastExport.text`)
	browsertest.Click(t, ctx, `#export-svg`)
	browsertest.WaitFor(t, ctx, `window.plugsimLastExport && window.plugsimLastExport.format === 'svg'`, "the SVG export")
	svg := browsertest.Eval[string](t, ctx, `window.plugsimLastExport.text`)
	title := browsertest.Eval[string](t, ctx, `document.getElementById('title').textContent`)
	file := filepath.Join(t.TempDir(), "shown.jsonl")
	if err := os.WriteFile(file, []byte(jsonl), 0o644); err != nil {
		t.Fatal(err)
	}
	drawn := filepath.Join(t.TempDir(), "trace.svg")
	if out, code := run(t, "trace", "--title", title, "--svg", drawn, file); code != 0 {
		t.Fatalf("harness trace: exit %d\n%s", code, out)
	}
	want, _ := os.ReadFile(drawn)
	// The page's lanes are the SVG's participants, in the same order.
	var boxes []string
	for _, m := range regexp.MustCompile(`class="box">([^<]*)<`).FindAllStringSubmatch(string(want), -1) {
		boxes = append(boxes, m[1])
	}
	if lanes := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#lanes .lane')].map(l => l.dataset.lane)`); strings.Join(lanes, ",") != strings.Join(boxes, ",") {
		t.Errorf("the page's lanes %v, harness trace --svg's participants %v", lanes, boxes)
	}
	subtitle := regexp.MustCompile(`<text [^>]*class="subtitle">\d+ calls from [^<]*</text>`)
	if a, b := subtitle.ReplaceAllString(svg, ""), subtitle.ReplaceAllString(string(want), ""); a != b || !strings.Contains(svg, "RunPodSandbox") {
		t.Errorf("the page's SVG export differs from harness trace --svg of its JSON-lines export:\n%.600s\n---\n%.600s", svg, want)
	}

	// A fault added from the form fails the next PullImage; the rule lists its hit.
	browsertest.Do(t, ctx,
		chromedp.SetValue(chromedp.CSS(`#fault-target`), "cri-fake"),
		chromedp.SetValue(chromedp.CSS(`#fault-method`), "PullImage"),
		chromedp.SetValue(chromedp.CSS(`#fault-code`), "Unavailable"),
		chromedp.SetValue(chromedp.CSS(`#fault-message`), "registry down (added from the view)"),
		chromedp.SetValue(chromedp.CSS(`#fault-times`), "1"),
	)
	browsertest.Click(t, ctx, `#fault-add`)
	browsertest.WaitFor(t, ctx, `document.getElementById('fault-result').textContent.startsWith('added')`, "the rule added")
	pull := filepath.Join(t.TempDir(), "pull.yaml")
	if err := os.WriteFile(pull, []byte(`name: the kubelet pulls an image
steps:
  - name: PullImage, which the rule added from the page fails
    interface: cri
    call: PullImage
    request: {image: {image: busybox}}
    expect: {code: Unavailable, error: registry down}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, "run", "--dir", dir, pull); code != 0 {
		t.Fatalf("PullImage after the rule was added from the page: exit %d, want the scenario (expecting Unavailable) to pass\n%s", code, out)
	}
	browsertest.WaitFor(t, ctx, `!!document.querySelector('#rows .call.failed[data-method="PullImage"][data-code="Unavailable"]')`, "the failed PullImage, red")
	if msg := browsertest.Eval[string](t, ctx, `document.querySelector('#rows .call.failed[data-method="PullImage"] .errline').textContent`); !strings.Contains(msg, "registry down") {
		t.Errorf("failed call's message %q, want the rule's", msg)
	}
	browsertest.WaitFor(t, ctx, `[...document.querySelectorAll('table.rules[data-target="cri-fake"] tr[data-rule]')].some(r => r.lastChild.textContent === '1')`, "the rule listed with 1 hit")
	browsertest.Screenshot(t, ctx, "ui-fault-injected")
}

// The page under `harness kubelet --pods N --concurrency 16` (N from PLUGSIM_UI_LOAD_PODS,
// default 1000): every call the server showed reaches the page or is counted lost, the DOM stays
// bounded, and the rate and the page's heap are logged (harness/README.md quotes them).
func TestPageUnderKubeletLoad(t *testing.T) {
	browsertest.Chromium(t)
	pods := os.Getenv("PLUGSIM_UI_LOAD_PODS")
	if pods == "" {
		pods = "1000"
	}
	dir := t.TempDir()
	url := upWithUI(t, dir)
	ctx := browsertest.Open(t, url)
	// Housekeeping shown, so the page draws all of it.
	browsertest.Eval[chromedp.Void](t, ctx, `(() => { const e = document.getElementById('show-housekeeping'); e.checked = true; e.dispatchEvent(new Event('change')); })()`)
	start := time.Now()
	out, code := run(t, "kubelet", "--dir", dir, "--pods", pods, "--concurrency", "16")
	if code != 0 {
		t.Fatalf("harness kubelet: exit %d\n%s", code, out)
	}
	wall := time.Since(start)
	// Everything the server made into calls has reached the page or been counted lost.
	browsertest.WaitFor(t, ctx, `plugsimApi('api/stats').then(r => r.json()).then(s => s.shown > 0 && window.plugsimStats.received + s.lost >= s.shown)`, "every call delivered or counted")
	type pageStats struct {
		Received float64 `json:"received"`
		First    float64 `json:"first"`
		Last     float64 `json:"last"`
		Lost     float64 `json:"lost"`
		Missed   float64 `json:"missed"`
		Rows     float64 `json:"rows"`
	}
	st := browsertest.Eval[pageStats](t, ctx, `Object.assign({rows: document.querySelectorAll('#rows .call').length}, window.plugsimStats)`)
	if st.Rows > 1500 {
		t.Errorf("the DOM holds %v rows, more than its window of 1500", st.Rows)
	}
	heap := browsertest.JSHeapUsed(t, ctx)
	span := (st.Last - st.First) / 1000
	t.Logf("harness kubelet --pods %s --concurrency 16 against the node: %s", pods, lastLines(out, 3))
	t.Logf("page: %.0f calls received in %.1fs (%.0f calls/s; kubelet run %.1fs), %.0f lost, %.0f missed by the fakes, %.0f rows in the DOM, JS heap %.1f MiB",
		st.Received, span, st.Received/span, wall.Seconds(), st.Lost, st.Missed, st.Rows, heap/(1<<20))
	browsertest.Screenshot(t, ctx, "ui-kubelet-load")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// Issue 24, 2, with the harness binary: `harness up --ui` as root, and another local user on the same
// machine. The user reaches the port but not the view (403 without the token, also with the header the
// page used to send), finds the token neither in the process's command line nor in its environment, and
// cannot enter the node's directory (0700) to read its traces or state.
func TestTheViewIsItsStartersOnly(t *testing.T) {
	u := localuser.New(t)
	dir := t.TempDir()
	url := upWithUI(t, dir)
	base, token, ok := strings.Cut(url, "/#token=")
	if !ok || len(token) != 32 {
		t.Fatalf("the view's URL %q carries no token", url)
	}
	st, err := wiring.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := u.TestCommand(t, "TestAnotherUsersAttempts", "PLUGSIM_VIEW="+base, "PLUGSIM_NODE_DIR="+dir, "PLUGSIM_NODE_PID="+strconv.Itoa(st.PID)).CombinedOutput()
	if err != nil {
		t.Fatalf("the other user's attempts: %v\n%s", err, out)
	}
	for _, want := range []string{"POST /api/faults/cri-fake: 403", "GET /api/faults: 403", "GET /api/events: 403", "cmdline without the token", "environ: permission denied", "node dir: permission denied"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("as %s: want %q in\n%s", u, want, out)
		}
	}
	if strings.Contains(string(out), token) {
		t.Errorf("the other user saw the token:\n%s", out)
	}
	// The one who started it gets in.
	req, _ := http.NewRequest(http.MethodGet, base+"/api/faults", nil)
	req.Header.Set(ui.TokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: %v %v", resp, err)
	}
	resp.Body.Close()
}

// The other user's side of TestTheViewIsItsStartersOnly.
func TestAnotherUsersAttempts(t *testing.T) {
	if !localuser.Helper(t.Name()) {
		return
	}
	base := os.Getenv("PLUGSIM_VIEW")
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/faults/cri-fake", `{"method":"PullImage","match":{"auth.password":"??c*"},"after":1000000000,"code":"Unavailable"}`},
		{"GET", "/api/faults", ""}, {"GET", "/api/events", ""},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
		req.Header.Set(ui.TokenHeader, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%s %s: %d\n", r.method, r.path, resp.StatusCode)
	}
	proc := "/proc/" + os.Getenv("PLUGSIM_NODE_PID")
	if b, err := os.ReadFile(proc + "/cmdline"); err == nil {
		fmt.Printf("cmdline without the token: %q\n", strings.ReplaceAll(string(b), "\x00", " "))
	}
	if _, err := os.ReadFile(proc + "/environ"); errors.Is(err, fs.ErrPermission) {
		fmt.Println("environ: permission denied")
	}
	if _, err := os.ReadDir(os.Getenv("PLUGSIM_NODE_DIR")); errors.Is(err, fs.ErrPermission) {
		fmt.Println("node dir: permission denied")
	}
}
