package diagram

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/trace"
)

var sample = []trace.Event{
	{Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Service: "runtime.v1.RuntimeService", Method: "RunPodSandbox", Code: "OK", DurationNS: int64(1200 * time.Microsecond)},
	{Interface: trace.CNI, Caller: "cri-fake", Callee: "plugsim", Service: "cni-fake,portmap", Method: "ADD", Code: "OK", DurationNS: int64(3 * time.Millisecond), Attrs: map[string]string{"pod": "default/web", "containerID": "abc"}},
	{Interface: trace.CSI, Caller: "kubelet", Callee: "csi-fake", Service: "csi.v1.Node", Method: "NodePublishVolume", Code: "OK", DurationNS: int64(300 * time.Microsecond)},
	{Interface: trace.CSI, Caller: "external-provisioner", Callee: "csi-fake", Service: "csi.v1.Controller", Method: "CreateVolume", Code: "AlreadyExists", Error: "volume <x> & \"y\"", DurationNS: 5000},
}

func TestLineDrawsLikeTheSourceNote(t *testing.T) {
	want := []string{
		"kubelet ──CRI──▶ cri-fake  RunPodSandbox 1.2ms",
		"cri-fake ──CNI ADD──▶ cni-fake → portmap  network=plugsim pod=default/web 3.0ms",
		"kubelet ──CSI──▶ csi-fake (node)  NodePublishVolume 300µs",
		"external-provisioner ──CSI──▶ csi-fake (controller)  CreateVolume 5µs  ✗ AlreadyExists: volume <x> & \"y\"",
	}
	for i, ev := range sample {
		if got := Line(ev); got != want[i] {
			t.Errorf("Line(%s) =\n  %s\nwant\n  %s", ev.Method, got, want[i])
		}
	}
}

func TestSVGIsWellFormedAndNamesEveryone(t *testing.T) {
	svg := string(SVG("pod <lifecycle>", "4 calls", []Section{{Title: "1. start", Events: sample[:2]}, {Title: "2. volume", Failed: true, Events: sample[2:]}}))
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed XML: %v", err)
			}
			break
		}
	}
	for _, want := range []string{">kubelet<", ">cri-fake<", ">cni-fake<", ">portmap<", ">csi-fake (node)<", ">external-provisioner<", "RunPodSandbox", "✗ AlreadyExists", "pod &lt;lifecycle&gt;"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// Callers stand left of the plugins they call.
	if strings.Index(svg, ">kubelet<") > strings.Index(svg, ">cri-fake<") {
		t.Error("kubelet is drawn right of cri-fake")
	}
}

func TestMermaid(t *testing.T) {
	m := Mermaid("demo", []Section{{Title: "1. start", Events: sample}})
	for _, want := range []string{"sequenceDiagram", "participant p0 as kubelet", "->>", "-x", "CNI ADD (chained)", "Note over"} {
		if !strings.Contains(m, want) {
			t.Errorf("Mermaid lacks %q:\n%s", want, m)
		}
	}
}

func TestFoldCNIKeepsOneEventPerInvocation(t *testing.T) {
	own := trace.Event{Interface: trace.CNI, Caller: "cri-fake", Callee: "cni-fake", Service: "cni-fake", Method: "ADD", Attrs: map[string]string{"containerID": "abc"}}
	other := own
	other.Attrs = map[string]string{"containerID": "zzz"}
	got := FoldCNI([]trace.Event{sample[0], sample[1], own, other})
	if len(got) != 3 || got[2].Attrs["containerID"] != "zzz" {
		t.Errorf("FoldCNI kept %d events: %+v", len(got), got)
	}
}

// TestOCILane: a runc call cri-fake made for a program container is drawn as its own boundary,
// cri-fake → runc, in every form.
func TestOCILane(t *testing.T) {
	ev := trace.Event{Interface: trace.OCI, Caller: "cri-fake", Callee: "runc", Service: "runc", Method: "create", Code: "OK",
		DurationNS: int64(40 * time.Millisecond), Attrs: map[string]string{"containerID": "0123456789abcdef0123"}}
	if got, want := Line(ev), "cri-fake ──runc create──▶ runc  container=0123456789abc 40.0ms"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	svg := string(SVG("t", "", []Section{{Events: append([]trace.Event{sample[0]}, ev)}}))
	for _, want := range []string{">runc<", "runc create", "#1a7f37", "OCI: runtime → runc"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if m := Mermaid("t", []Section{{Events: []trace.Event{ev}}}); !strings.Contains(m, "runc create") || !strings.Contains(m, "participant p1 as runc") {
		t.Errorf("Mermaid:\n%s", m)
	}
}

// TestClusterParticipantsOrder: a cluster's participants, named after their node, stand in the
// same order as a node's: the kubelet left, then the runtime, runc, the network plugins.
func TestClusterParticipantsOrder(t *testing.T) {
	at := func(ev trace.Event) trace.Event {
		ev.Caller, ev.Callee = ev.Caller+"@node1", ev.Callee+"@node1"
		return ev
	}
	oci := trace.Event{Interface: trace.OCI, Caller: "cri-fake", Callee: "runc", Service: "runc", Method: "create", Code: "OK"}
	cni := sample[1]
	cni.Service = "cni-fake@node1,portmap@node1"
	got := participants([]Section{{Events: []trace.Event{at(cni), at(oci), at(sample[0])}}})
	want := []string{"kubelet@node1", "cri-fake@node1", "runc@node1", "cni-fake@node1", "portmap@node1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("participants %v, want %v", got, want)
	}
}
