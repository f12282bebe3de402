package runtime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What cri-fake truthfully cannot do answers Unimplemented with the reason; the kubelet and
// critest have explicit fallbacks or skips for each of these. Exec, Attach, PortForward and
// ExecSync are in streaming.go: they work once a process simulation and streaming server are
// plugged in.

const noProcesses = "this container's process cannot exec, attach or port-forward (its launcher is not the process simulation)"

// CheckpointContainer is Unimplemented: there is no process state to checkpoint (CRIU).
func (s *Service) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return nil, status.Error(codes.Unimplemented, "CheckpointContainer: cri-fake has no process state to checkpoint (containerd uses CRIU)")
}

// CheckpointPod is Unimplemented: there is no process state to checkpoint.
func (s *Service) CheckpointPod(ctx context.Context, req *runtimeapi.CheckpointPodRequest) (*runtimeapi.CheckpointPodResponse, error) {
	return nil, status.Error(codes.Unimplemented, "CheckpointPod: cri-fake has no process state to checkpoint")
}

// RestorePod is Unimplemented: cri-fake writes no checkpoints to restore from.
func (s *Service) RestorePod(ctx context.Context, req *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, status.Error(codes.Unimplemented, "RestorePod: cri-fake writes no checkpoints, so there is nothing to restore")
}

// ListMetricDescriptors is Unimplemented: the pod metrics of KEP-2371 are cAdvisor-style
// measurements of real cgroups. critest's metrics specs skip on Unimplemented.
func (s *Service) ListMetricDescriptors(ctx context.Context, req *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "ListMetricDescriptors: cri-fake has no cgroups to measure (KEP-2371 metrics); use ListPodSandboxStats")
}

// ListPodSandboxMetrics is Unimplemented, like ListMetricDescriptors.
func (s *Service) ListPodSandboxMetrics(ctx context.Context, req *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "ListPodSandboxMetrics: cri-fake has no cgroups to measure (KEP-2371 metrics); use ListPodSandboxStats")
}

// StreamPodSandboxMetrics is Unimplemented, like ListPodSandboxMetrics.
func (s *Service) StreamPodSandboxMetrics(req *runtimeapi.StreamPodSandboxMetricsRequest, stream runtimeapi.RuntimeService_StreamPodSandboxMetricsServer) error {
	return status.Error(codes.Unimplemented, "StreamPodSandboxMetrics: cri-fake has no cgroups to measure (KEP-2371 metrics)")
}
