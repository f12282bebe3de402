//go:build e2e

// Package e2e runs the harness binary the way a user does: every example scenario, a scenario
// that must fail, the kubelet load, `harness up` with the real crictl against it, and a recorded
// trace replayed against a fresh cri-fake. The binaries come from $PLUGSIM_BIN (make build
// tools); a missing one fails the suite.
package e2e

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/testbin"
)

// tool returns $PLUGSIM_BIN/name, failing the test when it is missing.
func tool(t *testing.T, name string) string { t.Helper(); return testbin.Path(t, name) }

// repoRoot is two levels up from harness/e2e.
func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// harness runs the harness binary and returns its combined output and exit code.
func harness(t *testing.T, args ...string) (string, int) {
	t.Helper()
	tool(t, "cni-fake")
	cmd := exec.Command(tool(t, "harness"), args...)
	cmd.Dir = repoRoot(t)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("harness %v: %v", args, err)
	}
	return out.String(), code
}

func scenarios(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples/scenarios/*.yaml"))
	if err != nil || len(files) < 12 {
		t.Fatalf("want at least 12 example scenarios, found %d (%v)", len(files), err)
	}
	return files
}

func TestEveryExampleScenarioPasses(t *testing.T) {
	tool(t, "portmap") // the hostPort scenario needs the real plugin
	files := scenarios(t)
	out := t.TempDir()
	junit := filepath.Join(out, "junit.xml")
	args := append([]string{"run", "--junit", junit, "--diagram-dir", out}, files...)
	text, code := harness(t, args...)
	t.Log("\n" + text)
	if code != 0 {
		t.Fatalf("harness run exited %d", code)
	}
	want := regexp.MustCompile(`(\d+) scenarios: (\d+) passed, 0 failed, (\d+) skipped`)
	m := want.FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no summary line with 0 failed")
	}
	if os.Geteuid() == 0 && m[3] != "0" {
		t.Errorf("as root nothing should be skipped: %s", m[0])
	}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		for _, ext := range []string{".svg", ".mmd"} {
			if fi, err := os.Stat(filepath.Join(out, base+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("no diagram %s%s: %v", base, ext, err)
			}
		}
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("junit: %v", err)
	}
	if doc.Failures != 0 || len(doc.Suites) != len(files) || doc.Tests < 50 {
		t.Errorf("junit: %d suites, %d tests, %d failures", len(doc.Suites), doc.Tests, doc.Failures)
	}
	// The boundary trace is drawn one line per call, caller ──interface──▶ callee.
	for _, line := range []string{
		"kubelet ──CRI──▶ cri-fake  RunPodSandbox",
		"cri-fake ──CNI ADD──▶ cni-fake → portmap",
		"external-provisioner ──CSI──▶ csi-fake (controller)  CreateVolume",
		"kubelet ──CSI──▶ csi-fake (node)  NodePublishVolume",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("trace lacks %q", line)
		}
	}
}

func TestWrongExpectationFailsNamingStepAndLine(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "examples/scenarios/01-pod-lifecycle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "runtimeName: cri-fake", "runtimeName: containerd", 1)
	if bad == string(src) {
		t.Fatal("the scenario no longer checks runtimeName")
	}
	f := filepath.Join(t.TempDir(), "wrong.yaml")
	os.WriteFile(f, []byte(bad), 0o644)
	junit := filepath.Join(t.TempDir(), "junit.xml")
	text, code := harness(t, "run", "--junit", junit, f)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, text)
	}
	// Step 1 is the first "- name:" under steps; its line is what the failure must name.
	first := strings.Index(string(src), "\n  - name: ")
	if first < 0 {
		t.Fatal("the scenario has no step list")
	}
	stepLine := strings.Count(string(src[:first+1]), "\n") + 1
	for _, want := range []string{fmt.Sprintf("%s:%d: step 1", f, stepLine), "expected runtimeName equals containerd, got cri-fake", "0 passed, 1 failed"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if b, _ := os.ReadFile(junit); !bytes.Contains(b, []byte("<failure")) {
		t.Error("the JUnit file has no failure")
	}
}

func TestScenarioFileErrorsPointAtTheLine(t *testing.T) {
	f := filepath.Join(t.TempDir(), "typo.yaml")
	os.WriteFile(f, []byte("name: typo\nsteps:\n  - interface: cri\n    call: RunPodSandbox\n    request:\n      config:\n        metadata: {nam: web}\n"), 0o644)
	text, code := harness(t, "run", f)
	if code == 0 || !strings.Contains(text, f+":7: steps[0].request.config.metadata.nam") {
		t.Errorf("exit %d, output:\n%s", code, text)
	}
}

func TestKubeletLoad(t *testing.T) {
	text, code := harness(t, "kubelet", "--pods", "1000", "--concurrency", "16")
	t.Log("\n" + text)
	if code != 0 || !strings.Contains(text, "pods: 1000, errors: 0") || !strings.Contains(text, "pods/s") {
		t.Fatalf("exit %d", code)
	}
}

// up starts `harness up --dir DIR` and returns a stop function.
func up(t *testing.T, dir string) func() {
	t.Helper()
	cmd := exec.Command(tool(t, "harness"), "up", "--dir", dir, "--follow=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "harness.json")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("harness up exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("harness up did not come up:\n%s", out.String())
		}
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if text, code := harness(t, "down", "--dir", dir); code != 0 {
			t.Errorf("harness down: exit %d\n%s", code, text)
			cmd.Process.Kill()
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("harness up did not exit after harness down")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestUpWithCrictlThenRecordAndReplay(t *testing.T) {
	crictl := tool(t, "crictl")
	dir := filepath.Join(t.TempDir(), "node")
	stop := up(t, dir)

	// The real crictl against the node, as a person uses it.
	out, err := exec.Command(crictl, "--config", filepath.Join(dir, "crictl.yaml"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RuntimeName:  cri-fake") || !strings.Contains(string(out), "RuntimeApiVersion:  v1") {
		t.Fatalf("crictl version: %v\n%s", err, out)
	}
	out, err = exec.Command(crictl, "--config", filepath.Join(dir, "crictl.yaml"), "info").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"NetworkReady"`) || !strings.Contains(string(out), "10-plugsim.conflist") {
		t.Fatalf("crictl info: %v\n%s", err, out)
	}

	// Record: kubelet sequences and two scenarios against the running node.
	if text, code := harness(t, "kubelet", "--dir", dir, "--pods", "40", "--concurrency", "4"); code != 0 {
		t.Fatalf("kubelet load against the node: exit %d\n%s", code, text)
	}
	for _, s := range []string{"01-pod-lifecycle.yaml", "08-pvc-volume-lifecycle.yaml"} {
		if text, code := harness(t, "run", "--dir", dir, "examples/scenarios/"+s); code != 0 {
			t.Fatalf("%s against the node: exit %d\n%s", s, code, text)
		}
	}
	stop()

	// Replay what cri-fake and csi-fake recorded against fresh fakes.
	traces := []string{filepath.Join(dir, "var/log/plugsim/cri.jsonl"), filepath.Join(dir, "var/log/plugsim/csi.jsonl"), filepath.Join(dir, "var/log/plugsim/cni.jsonl")}
	scenario := filepath.Join(t.TempDir(), "replay.yaml")
	text, code := harness(t, append([]string{"replay", "--run", "-o", scenario}, traces...)...)
	if code != 0 || !strings.Contains(text, ", 0 mismatches") {
		t.Fatalf("replay: exit %d\n%s", code, text)
	}
	m := regexp.MustCompile(`replay: (\d+) steps, 0 mismatches`).FindStringSubmatch(text)
	if m == nil || len(m[1]) < 3 {
		t.Fatalf("replay summary: %q", m)
	}
	t.Logf("replayed %s steps with 0 mismatches", m[1])

	// The recorded trace draws as text and SVG.
	svg := filepath.Join(t.TempDir(), "trace.svg")
	text, code = harness(t, append([]string{"trace", "--svg", svg}, traces...)...)
	if code != 0 || !strings.Contains(text, "cri-fake ──CNI ADD──▶ cni-fake") {
		t.Fatalf("trace: exit %d\n%s", code, text)
	}
	if fi, err := os.Stat(svg); err != nil || fi.Size() < 1000 {
		t.Errorf("trace SVG: %v", err)
	}
}
