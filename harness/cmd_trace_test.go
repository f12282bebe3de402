package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/trace"
)

func writeTrace(t *testing.T, path string, evs ...trace.Event) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, ev := range evs {
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A cluster's trace files are merged by time, each node's participants named after it, the
// controller sidecars kept as they are, and the timer-driven calls and those outside the window dropped.
func TestTraceCluster(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(sec int, iface, caller, callee, service, method string) trace.Event {
		return trace.Event{Time: t0.Add(time.Duration(sec) * time.Second), Interface: iface, Caller: caller, Callee: callee, Service: service, Method: method, Code: "OK"}
	}
	writeTrace(t, filepath.Join(dir, "csi", "controller.jsonl"),
		ev(1, "CSI", "csi-provisioner", "csi-fake", "csi.v1.Controller", "CreateVolume"),
		ev(2, "CSI", "csi-attacher", "csi-fake", "csi.v1.Controller", "ControllerPublishVolume"),
		ev(9, "CSI", "csi-provisioner", "csi-fake", "csi.v1.Controller", "DeleteVolume"))
	writeTrace(t, filepath.Join(dir, "nodes", "node2", "csi.jsonl"),
		ev(3, "CSI", "kubelet", "csi-fake", "csi.v1.Node", "NodeStageVolume"),
		ev(4, "CSI", "kubelet", "csi-fake", "csi.v1.Node", "NodeGetCapabilities"))
	chain := ev(5, "CNI", "cri-fake", "plugsim", "cni-fake,portmap", "ADD")
	chain.Attrs = map[string]string{"containerID": "c1"}
	self := ev(5, "CNI", "cri-fake", "cni-fake", "cni-fake", "ADD")
	self.Attrs = map[string]string{"containerID": "c1"}
	writeTrace(t, filepath.Join(dir, "nodes", "node2", "cri.jsonl"),
		ev(0, "CRI", "kubelet", "cri-fake", "runtime.v1.RuntimeService", "ListPodSandbox"),
		ev(5, "CRI", "kubelet", "cri-fake", "runtime.v1.RuntimeService", "RunPodSandbox"), chain)
	// cni-fake's own log of the same ADD: folded into the chain's event.
	writeTrace(t, filepath.Join(dir, "nodes", "node2", "cni.jsonl"), self)

	svg := filepath.Join(dir, "out.svg")
	out := captureStdout(t, func() error {
		return cmdTrace([]string{"--cluster", dir, "--drop-polls", "--until", t0.Add(8 * time.Second).Format(time.RFC3339), "--svg", svg})
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var methods []string
	for _, l := range lines {
		f := strings.Fields(l)
		if strings.Contains(l, "CNI ADD") {
			methods = append(methods, "ADD")
			continue
		}
		methods = append(methods, f[len(f)-2])
	}
	want := []string{"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "RunPodSandbox", "ADD"}
	if strings.Join(methods, " ") != strings.Join(want, " ") {
		t.Fatalf("methods drawn: %v, want %v; output:\n%s", methods, want, out)
	}
	for _, s := range []string{"kubelet@node2", "cri-fake@node2", "csi-fake@node2 (node)", "csi-provisioner", "csi-fake (controller)",
		"cri-fake@node2 ──CNI ADD──▶ cni-fake@node2 → portmap@node2  network=plugsim "} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "csi-provisioner@") {
		t.Errorf("a controller sidecar was named after a node:\n%s", out)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "kubelet@node2") || !strings.Contains(string(b), "5 calls from the trace files of the cluster") {
		t.Errorf("the SVG (err %v) does not draw the 5 calls with the node's kubelet:\n%.400s", err, b)
	}
	// A diagram is committed to the repository: it must not name the directory it was drawn
	// from (here the test's temporary one).
	if strings.Contains(string(b), dir) || strings.Contains(string(b), os.TempDir()) {
		t.Errorf("the SVG names the directory %s it was drawn from", dir)
	}
	mermaid := filepath.Join(dir, "out.mmd")
	single := filepath.Join(dir, "nodes", "node2", "cri.jsonl")
	captureStdout(t, func() error { return cmdTrace([]string{"--svg", svg, "--mermaid", mermaid, single}) })
	for _, f := range []string{svg, mermaid} {
		b, err := os.ReadFile(f)
		if err != nil || strings.Contains(string(b), dir) {
			t.Errorf("%s (err %v) names the directory %s it was drawn from", filepath.Base(f), err, dir)
		}
	}
	if b, _ := os.ReadFile(svg); !strings.Contains(string(b), "calls from cri.jsonl<") {
		t.Errorf("the SVG's subtitle does not name the trace file cri.jsonl:\n%.600s", b)
	}
}

func TestTraceClusterRefusesOtherDirs(t *testing.T) {
	if _, err := collect.ClusterTraces(t.TempDir()); err == nil || !strings.Contains(err.Error(), "harness cluster up") {
		t.Errorf("an empty directory: %v, want an error naming harness cluster up", err)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"90s":                  now.Add(-90 * time.Second),
		"2026-12-01T09:00:00Z": now.Add(-time.Hour),
	} {
		got, err := parseWhen(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseWhen("yesterday", now); err == nil {
		t.Error(`parseWhen("yesterday"): no error`)
	}
}

func captureStdout(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	ferr := fn()
	w.Close()
	os.Stdout = old
	out := string(<-done)
	if ferr != nil {
		t.Fatalf("%v; output:\n%s", ferr, out)
	}
	return out
}
