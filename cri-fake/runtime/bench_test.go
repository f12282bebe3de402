package runtime

import (
	"context"
	"strconv"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkLifecycleInProcess is the kubelet's pod lifecycle (9 calls) straight into the
// handlers, without gRPC: the runtime's own bookkeeping cost. cri-fake/server's
// BenchmarkPodLifecycle measures the same over a socket against the upstream fake.
func BenchmarkLifecycleInProcess(b *testing.B) {
	s := newService(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := range b.N {
		cfg := podConfig("pod-" + strconv.Itoa(i))
		sb, err := s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		c, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: containerConfig("app"), SandboxConfig: cfg})
		if err != nil {
			b.Fatal(err)
		}
		s.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
		s.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
		s.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
		s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 30})
		s.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId})
		s.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
		if _, err := s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
	}
}
