package runtime

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateContainerResources records new Linux resources for a created or running container
// (ContainerStatus.resources shows them) and hands them to its process (the
// simulation bounds the container's in-memory files by the memory limit). There are no cgroups
// to write.
func (s *Service) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, storeError(err, "container "+req.GetContainerId())
	}
	if err := c.UpdateResources(req.GetLinux()); err != nil {
		return nil, storeError(err, "container "+c.ID)
	}
	if t := c.Task(); t != nil {
		t.Update(req.GetLinux())
	}
	s.persistContainer(c)
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog starts a new log file at the container's log path, after the kubelet has
// renamed the old one during rotation. Only a running container has a log to reopen (containerd:
// "container is not running").
func (s *Service) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, storeError(err, "container "+req.GetContainerId())
	}
	if c.Status().State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running: only a running container's log can be reopened", c.ID)
	}
	err = errors.ErrUnsupported // exited since the look: the log file is the runtime's to make
	if t := c.Task(); t != nil {
		err = t.ReopenLog()
	}
	if errors.Is(err, errors.ErrUnsupported) {
		err = createLogFile(c.LogPath)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reopen log of container %s: %v", c.ID, err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// UpdatePodSandboxResources records pod-level resources (shown in verbose PodSandboxStatus).
func (s *Service) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, storeError(err, "sandbox "+req.GetPodSandboxId())
	}
	sb.SetResources(req.GetResources())
	s.persistSandbox(sb)
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
