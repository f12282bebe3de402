// Package browsertest drives the live boundary view in a real browser for the end-to-end tests:
// Debian's headless Chromium over the DevTools protocol (chromedp), a fresh profile per test, no
// network beyond the page's own server.
package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
)

// Wait bounds every wait on the page: generous, since the machine may be busy; no test asserts
// how long anything took.
const Wait = 3 * time.Minute

// viewLine is what `harness ui`, `harness up --ui` and `harness cluster up --ui` print once the view
// listens.
var viewLine = regexp.MustCompile(`live boundary view on (http://\S+)`)

// StartView starts a harness command that serves the view (its --ui or --addr 127.0.0.1:0) and
// returns the page's URL from what it prints; the command gets SIGTERM when the test ends.
func StartView(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%s did not stop on SIGTERM", cmd.Path)
		}
	})
	urls := make(chan string, 1)
	var mu sync.Mutex
	var lines []string
	printed := func() string { mu.Lock(); defer mu.Unlock(); return strings.Join(lines, "\n") }
	// A failed test shows what the view's server said (a feed it could not follow, a fake it lost).
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what %s printed:\n%s", strings.Join(cmd.Args, " "), printed())
		}
	})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if m := viewLine.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		cmd.Wait()
	}()
	select {
	case u := <-urls:
		return u
	case <-done:
		t.Fatalf("%v exited before serving the view:\n%s", cmd.Args, printed())
	case <-time.After(Wait):
		t.Fatalf("%v printed no view address:\n%s", cmd.Args, printed())
	}
	return ""
}

// Chromium returns the browser binary, or skips the test saying why there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH: `make deps` installs Debian's chromium package when run as root (apt-get install chromium)")
	return ""
}

// Open starts a headless Chromium, opens url and waits until the page's event stream is live. The
// browser stops with the test.
func Open(t testing.TB, url string) context.Context {
	t.Helper()
	exe := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		// Without these Chromium reaches for the network at start (component updates, sync,
		// QUIC probes), which fails on a closed machine and slows it down.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1680, 1050),
		chromedp.Flag("js-flags", "--expose-gc"), // JSHeapUsed collects garbage first
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s in Chromium: %v", url, err)
	}
	WaitFor(t, ctx, `document.getElementById('status').classList.contains('live')`, "the page's event stream is live")
	return ctx
}

// WaitFor polls a JavaScript condition until it is true; when it never is, the failure says what the
// page showed (Describe).
func WaitFor(t testing.TB, ctx context.Context, cond, what string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(Wait), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s (%s): %v\nthe page: %s", what, cond, err, Describe(ctx))
	}
}

// describeJS sums up the page: its status, its counters, the server's stats, the lanes and the calls
// drawn (method, code, from → to), newest last.
const describeJS = `(async () => {
  const rows = [...document.querySelectorAll('#rows .call')];
  let server = null;
  try { server = await (await window.plugsimApi('api/stats')).json(); } catch (e) { server = String(e); }
  return JSON.stringify({
    status: document.getElementById('status').textContent,
    counters: document.querySelector('header .counters') ? document.querySelector('header .counters').textContent.replace(/\s+/g, ' ').trim() : '',
    page: window.plugsimStats, server,
    lanes: [...document.querySelectorAll('#lanes .lane')].map(l => l.dataset.lane),
    follow: document.getElementById('follow-banner') && !document.getElementById('follow-banner').hidden ? document.getElementById('follow-banner').textContent.trim() : '',
    rows: rows.length,
    calls: rows.slice(-80).map(r => r.dataset.method + (r.dataset.code && r.dataset.code !== 'OK' ? '(' + r.dataset.code + ')' : '') + ' ' + (r.title || '')),
  });
})()`

// Describe returns what the page shows, for a failure message (bounded in time: the page may be what
// failed).
func Describe(ctx context.Context) string {
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(dctx, chromedp.Evaluate[string](describeJS, chromedp.EvalAwaitPromise))
	if err != nil {
		return fmt.Sprintf("(could not read the page: %v)", err)
	}
	return v
}

// Eval evaluates a JavaScript expression and returns its value.
func Eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// Do runs actions on the page.
func Do(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%v", err)
	}
}

// Click clicks the element the CSS selector finds first (a DOM click, which bubbles as a user's
// does), failing the test when there is none.
func Click(t testing.TB, ctx context.Context, selector string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.scrollIntoView({block: 'center'}); e.click(); return true; })()`, selector)
	if !Eval[bool](t, ctx, js) {
		t.Fatalf("click %s: no such element", selector)
	}
}

// Methods returns the methods of the calls drawn, top to bottom.
func Methods(t testing.TB, ctx context.Context) []string {
	t.Helper()
	return Eval[[]string](t, ctx, `[...document.querySelectorAll('#rows .call')].map(r => r.dataset.method)`)
}

// Screenshot saves the page as NAME.png in $PLUGSIM_UI_SCREENSHOTS (what `make ui-screenshots`
// sets to harness/docs) or else in the test's temporary directory, and returns the path.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	dir := os.Getenv("PLUGSIM_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name+".png")
	if err := ScreenshotTo(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
	return path
}

// ScreenshotTo saves the page as a PNG at path.
func ScreenshotTo(ctx context.Context, path string) error {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 makes a PNG; below it, a JPEG
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}

// JSHeapUsed returns the page's used JavaScript heap in bytes (the DevTools Performance domain's
// JSHeapUsedSize), after a garbage collection.
func JSHeapUsed(t testing.TB, ctx context.Context) float64 {
	t.Helper()
	Eval[chromedp.Void](t, ctx, `void (window.gc && window.gc())`)
	if _, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{}); err != nil {
		t.Fatalf("Performance.enable: %v", err)
	}
	res, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		t.Fatalf("Performance.getMetrics: %v", err)
	}
	var used float64
	for _, m := range res.Metrics {
		if m.Name == "JSHeapUsedSize" {
			used = m.Value
		}
	}
	return used
}
