package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// With a CNI config template (containerd's conf_template) the kubelet's UpdateRuntimeConfig is what
// turns the network ready: the template is rendered with the pod CIDR into the conf dir, and the
// next Status loads it. Bad CIDRs are InvalidArgument, a template that fails is Unknown.
func TestUpdateRuntimeConfigRendersCNITemplate(t *testing.T) {
	conf := t.TempDir()
	tmpl := filepath.Join(t.TempDir(), "tmpl")
	os.WriteFile(tmpl, []byte(`{"cniVersion":"1.0.0","name":"pods","plugins":[{"type":"cni-fake","ipam":{"type":"host-local","ranges":[[{"subnet":"{{.PodCIDR}}"}]]}}]}`), 0o644)
	s := newService(t, func(o *Options) {
		o.Network = network.NewCNI(network.CNIOptions{ConfDir: conf, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir(), ConfTemplate: tmpl})
	})
	networkReady := func() *runtimeapi.RuntimeCondition {
		t.Helper()
		resp, err := s.Status(context.Background(), &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status.Conditions[1]
	}
	if c := networkReady(); c.Status || !contains(c.Message, "cni plugin not initialized") {
		t.Fatalf("before UpdateRuntimeConfig: %v", c)
	}
	update := func(cidr string) error {
		_, err := s.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
			NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}})
		return err
	}
	if err := update("10.244.2.0/24/x"); status.Code(err) != codes.InvalidArgument || !contains(err.Error(), "get routes: invalid pod CIDR") {
		t.Fatalf("bad CIDR: %v, want InvalidArgument", err)
	}
	if err := update(""); err != nil { // no pod CIDR yet: nothing to do
		t.Fatal(err)
	}
	if c := networkReady(); c.Status {
		t.Fatalf("ready without a pod CIDR: %v", c)
	}
	if err := update("10.244.2.0/24"); err != nil {
		t.Fatal(err)
	}
	if c := networkReady(); !c.Status {
		t.Fatalf("after UpdateRuntimeConfig: %v", c)
	}
	b, _ := os.ReadFile(filepath.Join(conf, network.ConfTemplateFileName))
	if !contains(string(b), `"subnet":"10.244.2.0/24"`) {
		t.Fatalf("rendered config %s", b)
	}

	// A template that fails to render: Unknown, and the network stays unready.
	os.WriteFile(tmpl, []byte(`{{.Missing}}`), 0o644)
	s2 := newService(t, func(o *Options) {
		o.Network = network.NewCNI(network.CNIOptions{ConfDir: t.TempDir(), BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir(), ConfTemplate: tmpl})
	})
	if _, err := s2.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.3.0/24"}}}); status.Code(err) != codes.Unknown || !contains(err.Error(), "failed to generate cni config file") {
		t.Fatalf("broken template: %v, want Unknown", err)
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
