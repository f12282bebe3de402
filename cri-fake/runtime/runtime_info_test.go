package runtime

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
)

func TestVersion(t *testing.T) {
	s := newService(t)
	v, err := s.Version(context.Background(), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet exits unless version is exactly "0.1.0"; cri-client wants all four non-empty.
	if v.Version != "0.1.0" || v.RuntimeName != "cri-fake" || v.RuntimeVersion == "" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("version %v", v)
	}
}

func TestStatusConditions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		net      network.Plugin
		ready    bool
		reason   string
		contains string
	}{
		{"built-in network", nil, true, "", ""},
		{"cni not initialized", &recordingNetwork{notReady: network.ErrCNINotInitialized}, false, "NetworkPluginNotReady", "cni plugin not initialized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(o *Options) { o.Network = tc.net })
			resp, err := s.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
			if err != nil {
				t.Fatal(err)
			}
			conds := resp.Status.Conditions
			if len(conds) < 2 || conds[0].Type != runtimeapi.RuntimeReady || !conds[0].Status || conds[1].Type != runtimeapi.NetworkReady {
				t.Fatalf("conditions %v", conds)
			}
			n := conds[1]
			if n.Status != tc.ready || n.Reason != tc.reason || (tc.contains != "" && !contains(n.Message, tc.contains)) {
				t.Fatalf("NetworkReady %v", n)
			}
			if resp.Info["config"] == "" || len(resp.RuntimeHandlers) != 2 || resp.RuntimeHandlers[1].Name != "runc" {
				t.Fatalf("verbose info or handlers missing: %v %v", resp.Info, resp.RuntimeHandlers)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestRuntimeConfig(t *testing.T) {
	for _, tc := range []struct {
		driver string
		want   runtimeapi.CgroupDriver
	}{{"", runtimeapi.CgroupDriver_CGROUPFS}, {"cgroupfs", runtimeapi.CgroupDriver_CGROUPFS}, {"systemd", runtimeapi.CgroupDriver_SYSTEMD}} {
		s := newService(t, func(o *Options) { o.CgroupDriver = tc.driver })
		resp, err := s.RuntimeConfig(context.Background(), &runtimeapi.RuntimeConfigRequest{})
		if err != nil || resp.Linux.CgroupDriver != tc.want {
			t.Fatalf("driver %q: %v %v", tc.driver, resp, err)
		}
	}
	if _, err := New(Options{RootDir: t.TempDir(), Images: newService(t).images, CgroupDriver: "bogus"}); err == nil {
		t.Fatal("bogus cgroup driver accepted")
	}
}

func TestUpdateRuntimeConfigPodCIDR(t *testing.T) {
	s := newService(t)
	if _, err := s.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.200.3.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	ip := sandboxState(t, s, runPod(t, s, "p")).Network.Ip
	if !contains(ip, "10.200.3.") {
		t.Fatalf("pod IP %s not from the pod CIDR 10.200.3.0/24", ip)
	}
}

func TestUnimplemented(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"CheckpointContainer": func() error {
			_, err := s.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: id})
			return err
		},
		"CheckpointPod": func() error {
			_, err := s.CheckpointPod(ctx, &runtimeapi.CheckpointPodRequest{PodSandboxId: pod})
			return err
		},
		"RestorePod": func() error { _, err := s.RestorePod(ctx, &runtimeapi.RestorePodRequest{}); return err },
		"ListMetricDescriptors": func() error {
			_, err := s.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
			return err
		},
		"ListPodSandboxMetrics": func() error {
			_, err := s.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), codes.Unimplemented) })
	}
}
