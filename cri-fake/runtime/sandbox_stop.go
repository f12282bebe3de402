package runtime

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/store"
)

// StopPodSandbox stops every container of the sandbox (forcibly, as containerd does: timeout 0),
// marks it NOTREADY and runs the CNI DEL chain with the same arguments as the ADD, then removes
// the network namespace. It is idempotent: an unknown ID or an already stopped sandbox is not an
// error (CRI: "If there are any running containers in the sandbox, they must be forcibly
// terminated ... must not return an error if all relevant resources have already been reclaimed").
func (s *Service) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if errors.Is(err, store.ErrNotFound) {
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, storeError(err, "sandbox "+req.GetPodSandboxId())
	}
	if err := s.stopPodSandbox(ctx, sb); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (s *Service) stopPodSandbox(ctx context.Context, sb *store.Sandbox) error {
	for _, c := range s.containers.InSandbox(sb.ID) {
		if err := s.stopContainer(ctx, c, 0); err != nil {
			return err
		}
	}
	wasReady := sb.Status().State == runtimeapi.PodSandboxState_SANDBOX_READY
	sb.SetNotReady()
	s.releaseSandbox(sb.ID)
	if wasReady {
		s.emit(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb, nil)
	}
	if !sb.IsHostNetwork() && !sb.Status().NetworkDown {
		pod := network.Pod{ID: sb.ID, NetNS: sb.NetNS, Config: sb.Config.Unpack()}
		if err := s.network.Teardown(ctx, pod); err != nil {
			s.persistSandbox(sb)
			return status.Errorf(codes.Unknown, "failed to destroy network for sandbox %q: %v", sb.ID, err)
		}
		if err := s.opts.NetNS.Remove(sb.NetNS); err != nil {
			s.persistSandbox(sb)
			return status.Errorf(codes.Internal, "failed to remove network namespace for sandbox %q: %v", sb.ID, err)
		}
		sb.SetNetworkDown()
	}
	s.persistSandbox(sb)
	return nil
}
