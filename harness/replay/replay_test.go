package replay

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/trace"
)

func ev(seq uint64, iface, svc, method, req, resp, code string) trace.Event {
	return trace.Event{Seq: seq, Time: time.Unix(0, int64(seq)), Interface: iface, Service: svc, Method: method,
		Caller: "kubelet", Callee: "cri-fake", Code: code, Request: json.RawMessage(req), Response: json.RawMessage(resp)}
}

func TestScenarioSubstitutesIDs(t *testing.T) {
	events := []trace.Event{
		ev(1, trace.CRI, "runtime.v1.RuntimeService", "RunPodSandbox", `{"config":{"metadata":{"name":"web","uid":"u1"}}}`, `{"podSandboxId":"sb-123"}`, "OK"),
		ev(2, trace.CNI, "cni-fake", "ADD", `{}`, `{}`, "OK"),
		ev(3, trace.CRI, "runtime.v1.ImageService", "PullImage", `{"image":{"image":"nginx"}}`, `{"imageRef":"sha256:abc"}`, "OK"),
		ev(4, trace.CRI, "runtime.v1.RuntimeService", "CreateContainer", `{"podSandboxId":"sb-123","config":{"metadata":{"name":"c"},"image":{"image":"sha256:abc"}}}`, `{"containerId":"c-9"}`, "OK"),
		ev(5, trace.CRI, "runtime.v1.RuntimeService", "GetContainerEvents", `{}`, ``, "OK"),
		ev(6, trace.CRI, "runtime.v1.RuntimeService", "ListPodSandbox", `{}`, `{"items":[{"id":"sb-123"}]}`, "OK"),
		ev(7, trace.CRI, "runtime.v1.RuntimeService", "StopContainer", `{"containerId":"c-9"}`, ``, "NotFound"),
		ev(8, trace.CSI, "csi.v1.Controller", "CreateVolume", `{"name":"pvc-1"}`, `{"volume":{"volumeId":"v-1","volumeContext":{"fooId":"x"}}}`, "OK"),
		ev(9, trace.CSI, "csi.v1.Node", "NodePublishVolume", `{"volumeId":"v-1","targetPath":"/t"}`, `{}`, "OK"),
	}
	out, st, err := Scenario(events, Options{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	y := string(out)
	for _, want := range []string{
		"podSandboxId_1: podSandboxId", `'${podSandboxId_1}'`, "imageRef_1: imageRef", `'${imageRef_1}'`,
		"containerId_1: containerId", "code: NotFound", "volume_volumeId_1: volume.volumeId", `'${volume_volumeId_1}'`,
	} {
		if !strings.Contains(y, want) {
			t.Errorf("scenario lacks %q:\n%s", want, y)
		}
	}
	if strings.Contains(y, "fooId") && strings.Contains(y, "volume_volumeContext") {
		t.Error("a volume context value was captured as an ID")
	}
	if st.Steps != 7 || st.Captures != 4 || st.Substituted != 4 {
		t.Errorf("stats %+v, want 7 steps, 4 captures, 4 substitutions", st)
	}
	sc, err := scenario.Parse(out, "replay.yaml")
	if err != nil {
		t.Fatalf("the replay does not parse: %v\n%s", err, y)
	}
	if len(sc.Steps) != 7 || sc.Steps[3].Expect.Code != "OK" || sc.Steps[4].Expect.Code != "NotFound" {
		t.Errorf("parsed steps: %d", len(sc.Steps))
	}
}

func TestScenarioWithoutCallsIsAnError(t *testing.T) {
	if _, _, err := Scenario([]trace.Event{ev(1, trace.CNI, "", "ADD", "{}", "{}", "OK")}, Options{}); err == nil {
		t.Error("a trace with only CNI calls converted")
	}
}
