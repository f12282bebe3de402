package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestFileStateRoundTrip(t *testing.T) {
	f := FileState{Dir: t.TempDir()}
	sb := &Sandbox{ID: "s1", Name: "p_ns_u_0", RuntimeHandler: "runc", CreatedAt: 7, NetNS: "/x", IPs: []string{"10.0.0.2"},
		LogDirectory: "/logs", CNIResult: []byte(`{"cniVersion":"1.0.0"}`),
		Config: PackSandbox(&runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}, Labels: map[string]string{"a": "b"}})}
	sb.SetNotReady()
	c := NewContainer(ContainerSpec{ID: "c1", Name: "c_p_ns_u_0", SandboxID: "s1", ImageID: "sha256:1", ImageRef: "r@sha256:2",
		ImageName: "r:1", LogPath: "/logs/c.log", CreatedAt: 8, StopSignal: runtimeapi.Signal_SIGNAL_SIGQUIT,
		Config: Pack(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Annotations: map[string]string{"h": "1"}})})
	c.SetStarting()
	c.SetRunning(9, nil)
	c.SetExited(10, 3, "Error", "oops")
	if err := f.SaveSandbox(sb); err != nil {
		t.Fatal(err)
	}
	if err := f.SaveContainer(c); err != nil {
		t.Fatal(err)
	}
	if err := f.SaveImages([]ImageRecord{{ID: "sha256:1", RepoTags: []string{"r:1"}}}); err != nil {
		t.Fatal(err)
	}
	l, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sandboxes) != 1 || len(l.Containers) != 1 || len(l.Images) != 1 {
		t.Fatalf("loaded %d/%d/%d", len(l.Sandboxes), len(l.Containers), len(l.Images))
	}
	gs, gc := l.Sandboxes[0], l.Containers[0]
	if gs.ID != sb.ID || gs.Name != sb.Name || !proto.Equal(gs.Config.Unpack(), sb.Config.Unpack()) || gs.Status().State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY ||
		gs.IPs[0] != "10.0.0.2" || gs.NetNS != "/x" || gs.LogDirectory != "/logs" || string(gs.CNIResult) != string(sb.CNIResult) {
		t.Fatalf("sandbox round trip: %+v", gs)
	}
	st := gc.Status()
	if gc.ImageRef != c.ImageRef || gc.StopSignal != runtimeapi.Signal_SIGNAL_SIGQUIT || !proto.Equal(gc.Config.Unpack(), c.Config.Unpack()) ||
		st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 3 || st.Reason != "Error" || st.FinishedAt != 10 {
		t.Fatalf("container round trip: %+v %+v", gc.ContainerSpec, st)
	}
	if err := f.DeleteContainer("c1"); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteContainer("c1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if l, _ := f.Load(); len(l.Containers) != 0 {
		t.Fatal("deleted container loaded")
	}
	// No temporary files left behind.
	ents, _ := os.ReadDir(filepath.Join(f.Dir, "sandboxes"))
	if len(ents) != 1 {
		t.Fatalf("sandboxes dir: %v", ents)
	}
}

func TestFileStateCorruptRecordNamesTheFile(t *testing.T) {
	f := FileState{Dir: t.TempDir()}
	os.MkdirAll(filepath.Join(f.Dir, "sandboxes"), 0o700)
	os.WriteFile(filepath.Join(f.Dir, "sandboxes", "bad.json"), []byte("{"), 0o600)
	if _, err := f.Load(); err == nil || !contains(err.Error(), "bad.json") {
		t.Fatalf("err %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
