package ui

import (
	"encoding/json"
	"testing"

	"github.com/plugsim/plugsim/harness/trace"
)

// What each call is found to concern, from its own request and from the calls before it.
func TestConcerns(t *testing.T) {
	x := newPodIndex()
	ev := func(iface, method, req, resp string, attrs map[string]string) trace.Event {
		e := trace.Event{Interface: iface, Method: method, Code: "OK", Attrs: attrs}
		if req != "" {
			e.Request = json.RawMessage(req)
		}
		if resp != "" {
			e.Response = json.RawMessage(resp)
		}
		return e
	}
	for _, tc := range []struct {
		name string
		ev   trace.Event
		want Concerns
	}{
		{"RunPodSandbox names the pod", ev("CRI", "RunPodSandbox", `{"config":{"metadata":{"name":"web","namespace":"default","uid":"u1"}}}`, `{"podSandboxId":"s1"}`, nil), Concerns{Pod: "default/web", Sandbox: "s1"}},
		{"the CNI ADD by its container ID", ev("CNI", "ADD", "", "", map[string]string{"containerID": "s1"}), Concerns{Pod: "default/web", Sandbox: "s1"}},
		{"CreateContainer", ev("CRI", "CreateContainer", `{"podSandboxId":"s1","config":{"metadata":{"name":"nginx"}}}`, `{"containerId":"c1"}`, nil), Concerns{Pod: "default/web", Sandbox: "s1", Container: "c1"}},
		{"a container call by the container alone", ev("CRI", "StartContainer", `{"containerId":"c1"}`, "", nil), Concerns{Pod: "default/web", Sandbox: "s1", Container: "c1"}},
		{"a runc call by its container", ev("OCI", "create", `{"args":["create"]}`, "", map[string]string{"containerID": "c1"}), Concerns{Pod: "default/web", Sandbox: "s1", Container: "c1"}},
		{"CreateVolume's answer", ev("CSI", "CreateVolume", `{"name":"pvc-1"}`, `{"volume":{"volumeId":"v1"}}`, nil), Concerns{Volume: "v1"}},
		{"NodePublishVolume by the kubelet's pod directory", ev("CSI", "NodePublishVolume", `{"volumeId":"v1","targetPath":"/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv/mount"}`, "", nil), Concerns{Pod: "default/web", Volume: "v1"}},
		{"NodePublishVolume with pod info", ev("CSI", "NodePublishVolume", `{"volumeId":"v2","volumeContext":{"csi.storage.k8s.io/pod.name":"db","csi.storage.k8s.io/pod.namespace":"prod"}}`, "", nil), Concerns{Pod: "prod/db", Volume: "v2"}},
		{"an unfiltered relist", ev("CRI", "ListPodSandbox", `{}`, `{"items":[{"id":"s1"}]}`, nil), Concerns{}},
		{"a request of another shape", ev("CRI", "ContainerStatus", `{"containerId":7}`, `[1,2]`, nil), Concerns{}},
		{"an unknown sandbox", ev("CRI", "PodSandboxStatus", `{"podSandboxId":"zzz"}`, "", nil), Concerns{Sandbox: "zzz"}},
	} {
		if got := x.concerns(tc.ev); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Hostile or endless IDs do not grow the index past its bound.
func TestConcernsBounded(t *testing.T) {
	x := newPodIndex()
	for i := range 3 * maxIndexed {
		id := json.RawMessage(`{"podSandboxId":"s` + string(rune('a'+i%26)) + jsonInt(i) + `"}`)
		x.concerns(trace.Event{Interface: "CRI", Method: "RunPodSandbox", Code: "OK", Request: json.RawMessage(`{"config":{"metadata":{"name":"p","uid":"u` + jsonInt(i) + `"}}}`), Response: id})
	}
	if len(x.sandboxPod) > maxIndexed || len(x.uidPod) > maxIndexed {
		t.Errorf("index grew to %d sandboxes, %d UIDs (bound %d)", len(x.sandboxPod), len(x.uidPod), maxIndexed)
	}
}

func jsonInt(i int) string { b, _ := json.Marshal(i); return string(b) }
