package call

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		iface, name, full, err string
		stream                 bool
	}{
		{iface: "cri", name: "RunPodSandbox", full: "/runtime.v1.RuntimeService/RunPodSandbox"},
		{iface: "CRI", name: "ImageStatus", full: "/runtime.v1.ImageService/ImageStatus"},
		{iface: "cri", name: "ImageService/PullImage", full: "/runtime.v1.ImageService/PullImage"},
		{iface: "cri", name: "/runtime.v1.RuntimeService/Status", full: "/runtime.v1.RuntimeService/Status"},
		{iface: "cri", name: "GetContainerEvents", full: "/runtime.v1.RuntimeService/GetContainerEvents", stream: true},
		{iface: "csi", name: "NodePublishVolume", full: "/csi.v1.Node/NodePublishVolume"},
		{iface: "csi", name: "Controller/CreateVolume", full: "/csi.v1.Controller/CreateVolume"},
		{iface: "csi", name: "GetPluginInfo", full: "/csi.v1.Identity/GetPluginInfo"},
		{iface: "cri", name: "runpodsandbox", err: "did you mean RunPodSandbox"},
		{iface: "cri", name: "RuntimeService/PullImage", err: `no method "RuntimeService/PullImage"`},
		{iface: "cni", name: "ADD", err: `unknown interface "cni"`},
	}
	for _, tc := range tests {
		m, err := Lookup(tc.iface, tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Lookup(%s, %s) error = %v, want %q", tc.iface, tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Lookup(%s, %s): %v", tc.iface, tc.name, err)
			continue
		}
		if m.FullMethod != tc.full || m.ServerStreaming != tc.stream {
			t.Errorf("Lookup(%s, %s) = %s stream=%v, want %s stream=%v", tc.iface, tc.name, m.FullMethod, m.ServerStreaming, tc.full, tc.stream)
		}
	}
}

func TestNewRequestAcceptsBothFieldNameStyles(t *testing.T) {
	m, err := Lookup("cri", "StopContainer")
	if err != nil {
		t.Fatal(err)
	}
	for _, js := range []string{`{"containerId":"c1","timeout":"5"}`, `{"container_id":"c1","timeout":5}`} {
		req, err := m.NewRequest([]byte(js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if got := string(JSON(req)); !strings.Contains(got, `"containerId":"c1"`) || !strings.Contains(got, `"timeout":"5"`) {
			t.Errorf("%s became %s", js, got)
		}
	}
	if _, err := m.NewRequest([]byte(`{"containerID":"c1"}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
}

func TestMethodsListsBothServices(t *testing.T) {
	ms := strings.Join(Methods("cri"), " ")
	for _, want := range []string{"PullImage", "RunPodSandbox", "Version"} {
		if !strings.Contains(ms, want) {
			t.Errorf("Methods(cri) lacks %s", want)
		}
	}
}
