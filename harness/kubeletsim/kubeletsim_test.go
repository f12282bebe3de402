package kubeletsim

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/call"
)

// scripted is a server for any CRI or CSI method: it answers each call with an empty response of
// the right type unless a hook fills it in, and records the order of the calls.
type scripted struct {
	mu    sync.Mutex
	calls []string
	hooks map[string]func(req proto.Message) proto.Message
}

func (s *scripted) handle(_ any, stream grpc.ServerStream) error {
	full, _ := grpc.MethodFromServerStream(stream)
	iface := "cri"
	if strings.HasPrefix(full, "/csi.") {
		iface = "csi"
	}
	m, err := call.Lookup(iface, full)
	if err != nil {
		return err
	}
	req := m.Input.New().Interface()
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	s.mu.Lock()
	s.calls = append(s.calls, m.Name)
	hook := s.hooks[m.Name]
	s.mu.Unlock()
	resp := m.Output.New().Interface()
	if hook != nil {
		resp = hook(req)
	}
	return stream.SendMsg(resp)
}

func (s *scripted) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func serve(t testing.TB, s *scripted) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(s.handle))
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	cc, err := call.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// criScript answers like a runtime: images appear when pulled, init containers exit at once.
func criScript() *scripted {
	var mu sync.Mutex
	pulled := map[string]bool{}
	state := map[string]runtimeapi.ContainerState{}
	labels := map[string]map[string]string{}
	return &scripted{hooks: map[string]func(proto.Message) proto.Message{
		"Version": func(proto.Message) proto.Message {
			return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeApiVersion: "v1"}
		},
		"RunPodSandbox": func(r proto.Message) proto.Message {
			return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb-" + r.(*runtimeapi.RunPodSandboxRequest).Config.Metadata.Uid}
		},
		"ImageStatus": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			img := r.(*runtimeapi.ImageStatusRequest).Image.Image
			if pulled[img] || strings.HasPrefix(img, "sha256:") {
				return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:1"}}
			}
			return &runtimeapi.ImageStatusResponse{}
		},
		"PullImage": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			pulled[r.(*runtimeapi.PullImageRequest).Image.Image] = true
			return &runtimeapi.PullImageResponse{ImageRef: "sha256:1"}
		},
		"CreateContainer": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			req := r.(*runtimeapi.CreateContainerRequest)
			id := req.PodSandboxId + "/" + req.Config.Metadata.Name
			state[id] = runtimeapi.ContainerState_CONTAINER_CREATED
			labels[id] = req.Config.Labels
			return &runtimeapi.CreateContainerResponse{ContainerId: id}
		},
		"StartContainer": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			id := r.(*runtimeapi.StartContainerRequest).ContainerId
			state[id] = runtimeapi.ContainerState_CONTAINER_RUNNING
			if strings.Contains(id, "/init-") {
				state[id] = runtimeapi.ContainerState_CONTAINER_EXITED
			}
			return &runtimeapi.StartContainerResponse{}
		},
		"StopContainer": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			state[r.(*runtimeapi.StopContainerRequest).ContainerId] = runtimeapi.ContainerState_CONTAINER_EXITED
			return &runtimeapi.StopContainerResponse{}
		},
		"ContainerStatus": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{State: state[r.(*runtimeapi.ContainerStatusRequest).ContainerId]}}
		},
		"ListContainers": func(r proto.Message) proto.Message {
			mu.Lock()
			defer mu.Unlock()
			uid := r.(*runtimeapi.ListContainersRequest).GetFilter().GetLabelSelector()[LabelPodUID]
			resp := &runtimeapi.ListContainersResponse{}
			for id, l := range labels {
				if uid == "" || l[LabelPodUID] == uid {
					resp.Containers = append(resp.Containers, &runtimeapi.Container{Id: id})
				}
			}
			return resp
		},
		"ListPodSandbox": func(r proto.Message) proto.Message {
			uid := r.(*runtimeapi.ListPodSandboxRequest).GetFilter().GetLabelSelector()[LabelPodUID]
			return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "sb-" + uid}}}
		},
	}}
}

func TestPodSequenceFollowsTheKubeletsOrder(t *testing.T) {
	s := criScript()
	k := New(serve(t, s))
	ctx := context.Background()
	if _, err := k.Startup(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := s.take(), []string{"Version", "ImageFsInfo", "RuntimeConfig", "Version", "Status"}; !slices.Equal(got, want) {
		t.Errorf("startup calls\n got %v\nwant %v", got, want)
	}
	pod := Pod{Name: "web", Namespace: "default", UID: "u1",
		InitContainers: []Container{{Name: "init-a", Image: "busybox"}, {Name: "init-b", Image: "busybox"}},
		Containers:     []Container{{Name: "app", Image: "nginx"}}}
	r, err := k.StartPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"RunPodSandbox", "PodSandboxStatus",
		// first init container: image absent → pull; then it must exit before the next starts
		"ImageStatus", "PullImage", "ImageStatus", "ImageStatus", "CreateContainer", "StartContainer", "ContainerStatus",
		// second init container: image present now
		"ImageStatus", "ImageStatus", "CreateContainer", "StartContainer", "ContainerStatus",
		"ImageStatus", "PullImage", "ImageStatus", "ImageStatus", "CreateContainer", "StartContainer",
	}
	if got := s.take(); !slices.Equal(got, want) {
		t.Errorf("pod start calls\n got %v\nwant %v", got, want)
	}
	if err := k.StopPod(ctx, r, 30); err != nil {
		t.Fatal(err)
	}
	got := s.take()
	if !slices.Equal(got[:3], []string{"StopContainer", "StopContainer", "StopContainer"}) || got[3] != "StopPodSandbox" ||
		!slices.Equal(got[4:7], []string{"ListPodSandbox", "PodSandboxStatus", "ListContainers"}) {
		t.Errorf("stop calls %v", got)
	}
	if err := k.RemovePod(ctx, r); err != nil {
		t.Fatal(err)
	}
	got = s.take()
	if n := len(got); n != 3*3+2 || got[2] != "RemoveContainer" || got[n-2] != "StopPodSandbox" || got[n-1] != "RemovePodSandbox" {
		t.Errorf("removal calls %v", got)
	}
}

func TestVolumeLifecycleOrder(t *testing.T) {
	s := &scripted{hooks: map[string]func(proto.Message) proto.Message{
		"GetPluginInfo": func(proto.Message) proto.Message { return &csi.GetPluginInfoResponse{Name: "csi.test"} },
		"GetPluginCapabilities": func(proto.Message) proto.Message {
			return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{Type: &csi.PluginCapability_Service_{
				Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}}}}
		},
		"ControllerGetCapabilities": func(proto.Message) proto.Message {
			var cs []*csi.ControllerServiceCapability
			for _, c := range []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME} {
				cs = append(cs, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
			}
			return &csi.ControllerGetCapabilitiesResponse{Capabilities: cs}
		},
		"NodeGetCapabilities": func(proto.Message) proto.Message {
			var cs []*csi.NodeServiceCapability
			for _, c := range []csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csi.NodeServiceCapability_RPC_GET_VOLUME_STATS} {
				cs = append(cs, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}}})
			}
			return &csi.NodeGetCapabilitiesResponse{Capabilities: cs}
		},
		"NodeGetInfo": func(proto.Message) proto.Message { return &csi.NodeGetInfoResponse{NodeId: "node-1"} },
		"CreateVolume": func(proto.Message) proto.Message {
			return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1"}}
		},
	}}
	cc := serve(t, s)
	st := NewStorage(cc, cc, t.TempDir())
	ctx := context.Background()
	if err := st.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	s.take()
	if err := st.VolumeLifecycle(ctx, "pvc1", "pod1", 1<<30); err != nil {
		t.Fatal(err)
	}
	want := []string{"CreateVolume", "ControllerPublishVolume", "NodeGetCapabilities", "NodeStageVolume", "NodePublishVolume",
		"NodeGetVolumeStats", "NodeUnpublishVolume", "NodeGetCapabilities", "NodeUnstageVolume", "ControllerUnpublishVolume", "DeleteVolume"}
	if got := s.take(); !slices.Equal(got, want) {
		t.Errorf("volume calls\n got %v\nwant %v", got, want)
	}
}

func TestLoadReportsEveryPod(t *testing.T) {
	k := New(serve(t, criScript()))
	rep := RunLoad(context.Background(), k, LoadOptions{Pods: 40, Concurrency: 4, InitContainers: 1})
	if rep.Failed != 0 {
		t.Fatalf("%d pods failed: %v", rep.Failed, rep.FirstErrors)
	}
	if rep.PodLifecycle.Count != 40 || rep.Methods["RunPodSandbox"].Count != 40 || rep.Methods["RemovePodSandbox"].Count != 40 {
		t.Errorf("counts: lifecycle %d, RunPodSandbox %d, RemovePodSandbox %d", rep.PodLifecycle.Count, rep.Methods["RunPodSandbox"].Count, rep.Methods["RemovePodSandbox"].Count)
	}
	var b strings.Builder
	rep.Write(&b)
	if !strings.Contains(b.String(), "pods: 40, errors: 0") || !strings.Contains(b.String(), "pods/s") {
		t.Errorf("report:\n%s", b.String())
	}
}
