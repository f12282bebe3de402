package runtime

import (
	"context"
	"errors"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// RemovePodSandbox removes a sandbox and its containers. A sandbox still READY is stopped first
// (CRI: "If there are any running containers in the sandbox, they must be forcibly terminated and
// removed"). An unknown ID is not an error.
func (s *Service) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if errors.Is(err, store.ErrNotFound) {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, storeError(err, "sandbox "+req.GetPodSandboxId())
	}
	if err := s.stopPodSandbox(ctx, sb); err != nil {
		return nil, err
	}
	for _, c := range s.containers.InSandbox(sb.ID) {
		if err := s.removeContainer(ctx, c); err != nil {
			return nil, err
		}
	}
	s.sandboxes.Delete(sb)
	s.unpersistSandbox(sb.ID)
	s.emit(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb, nil)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}
