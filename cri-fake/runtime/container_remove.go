package runtime

import (
	"context"
	"errors"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// RemoveContainer removes a container; a running one is killed first (CRI: "If the container is
// running, the container must be forcibly removed"). An unknown ID is not an error. The log file
// stays: the kubelet owns the pod log directory and cleans it up.
func (s *Service) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if errors.Is(err, store.ErrNotFound) {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err != nil {
		return nil, storeError(err, "container "+req.GetContainerId())
	}
	if err := s.removeContainer(ctx, c); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (s *Service) removeContainer(ctx context.Context, c *store.Container) error {
	if err := s.stopContainer(ctx, c, 0); err != nil {
		return err
	}
	if err := c.SetRemoving(); err != nil {
		return storeError(err, "container "+c.ID)
	}
	s.containers.Delete(c)
	s.releaseContainer(c.ID)
	s.forgetContainer(c)
	if sb, err := s.sandboxes.Get(c.SandboxID); err == nil {
		s.emit(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb, c)
	}
	return nil
}
