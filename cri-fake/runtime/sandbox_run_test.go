package runtime

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
)

func TestRunPodSandboxValidation(t *testing.T) {
	s := newService(t)
	for _, tc := range []struct {
		name string
		req  *runtimeapi.RunPodSandboxRequest
		want codes.Code
	}{
		{"no config", &runtimeapi.RunPodSandboxRequest{}, codes.InvalidArgument},
		{"no metadata", &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}}, codes.InvalidArgument},
		{"no name", &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Namespace: "n", Uid: "u"}}}, codes.InvalidArgument},
		{"no namespace", &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u"}}}, codes.InvalidArgument},
		{"no uid", &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n"}}}, codes.InvalidArgument},
		{"bad port", &runtimeapi.RunPodSandboxRequest{Config: func() *runtimeapi.PodSandboxConfig {
			c := podConfig("port")
			c.PortMappings = []*runtimeapi.PortMapping{{ContainerPort: 70000}}
			return c
		}()}, codes.InvalidArgument},
		{"unknown handler", &runtimeapi.RunPodSandboxRequest{Config: podConfig("h"), RuntimeHandler: "kata"}, codes.InvalidArgument},
		{"default handler", &runtimeapi.RunPodSandboxRequest{Config: podConfig("d")}, codes.OK},
		{"named handler", &runtimeapi.RunPodSandboxRequest{Config: podConfig("r"), RuntimeHandler: "runc"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.RunPodSandbox(context.Background(), tc.req)
			wantCode(t, err, tc.want)
		})
	}
}

func TestRunPodSandboxDuplicateName(t *testing.T) {
	s := newService(t)
	runPod(t, s, "dup")
	_, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("dup")})
	wantCode(t, err, codes.AlreadyExists)

	// Another attempt of the same pod is a different sandbox (the kubelet's restart path).
	cfg := podConfig("dup")
	cfg.Metadata.Attempt = 1
	if _, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
		t.Fatalf("attempt 1: %v", err)
	}
}

func TestRunPodSandboxNameFreedAfterRemove(t *testing.T) {
	s := newService(t)
	id := runPod(t, s, "again")
	if _, err := s.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	runPod(t, s, "again")
}

func TestRunPodSandboxStatusEcho(t *testing.T) {
	s := newService(t)
	cfg := podConfig("echo")
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
	}}
	resp, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: "runc"})
	if err != nil {
		t.Fatal(err)
	}
	st := sandboxState(t, s, resp.PodSandboxId)
	if st.Id != resp.PodSandboxId || !proto.Equal(st.Metadata, cfg.Metadata) || st.State != runtimeapi.PodSandboxState_SANDBOX_READY ||
		st.CreatedAt == 0 || st.RuntimeHandler != "runc" || st.Labels["app"] != "echo" || st.Annotations["note"] != "pod echo" ||
		st.Linux.GetNamespaces().GetOptions().GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		t.Fatalf("status does not echo the config: %v", st)
	}
	if net.ParseIP(st.Network.GetIp()) == nil {
		t.Fatalf("pod IP %q is not an IP", st.Network.GetIp())
	}
}

func TestRunPodSandboxDistinctIPs(t *testing.T) {
	s := newService(t)
	seen := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d"} {
		ip := sandboxState(t, s, runPod(t, s, n)).Network.Ip
		if seen[ip] {
			t.Fatalf("IP %s given twice", ip)
		}
		seen[ip] = true
	}
}

func TestRunPodSandboxHostNetwork(t *testing.T) {
	net := &recordingNetwork{}
	s := newService(t, func(o *Options) { o.Network = net })
	cfg := podConfig("host")
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
	}}
	resp, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(net.adds) != 0 {
		t.Fatalf("host-network sandbox ran CNI ADD: %v", net.adds)
	}
	st := sandboxState(t, s, resp.PodSandboxId)
	if st.Linux.Namespaces.Options.Network != runtimeapi.NamespaceMode_NODE {
		t.Fatalf("network mode not echoed: %v", st.Linux.Namespaces.Options)
	}
	if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: resp.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	if len(net.dels) != 0 {
		t.Fatalf("host-network sandbox ran CNI DEL: %v", net.dels)
	}
}

func TestRunPodSandboxNetworkNotReady(t *testing.T) {
	s := newService(t, func(o *Options) { o.Network = &recordingNetwork{notReady: network.ErrCNINotInitialized} })
	_, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("p")})
	wantCode(t, err, codes.FailedPrecondition)
	// The name is free again after the failure.
	s.network = &recordingNetwork{}
	runPod(t, s, "p")
}

func TestRunPodSandboxSetupFailureRollsBack(t *testing.T) {
	net := &recordingNetwork{setupErr: errors.New("plugin exploded")}
	s := newService(t, func(o *Options) { o.Network = net })
	_, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("p")})
	wantCode(t, err, codes.Unknown)
	if len(net.dels) != 1 {
		t.Fatalf("failed ADD was not followed by a DEL (containerd cleans up IPAM): dels=%v", net.dels)
	}
	if n := s.sandboxes.Len(); n != 0 {
		t.Fatalf("%d sandboxes left after a failed RunPodSandbox", n)
	}
	net.setupErr = nil
	runPod(t, s, "p")
}

// recordingNetwork is a network.Plugin that records calls.
type recordingNetwork struct {
	notReady    error
	setupErr    error
	teardownErr error
	adds, dels  []network.Pod
}

func (n *recordingNetwork) Ready() error { return n.notReady }
func (n *recordingNetwork) Setup(ctx context.Context, pod network.Pod) (network.Result, error) {
	n.adds = append(n.adds, pod)
	if n.setupErr != nil {
		return network.Result{}, n.setupErr
	}
	return network.Result{IPs: []string{"10.1.0.9", "fd00::9"}}, nil
}
func (n *recordingNetwork) Teardown(ctx context.Context, pod network.Pod) error {
	n.dels = append(n.dels, pod)
	return n.teardownErr
}
func (n *recordingNetwork) Info() map[string]string { return map[string]string{"network": "recording"} }
func (n *recordingNetwork) SetPodCIDR(string) error { return nil }
