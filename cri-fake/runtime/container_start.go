package runtime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// StartContainer moves a CREATED container to RUNNING. The transition is guarded in the store
// (only CREATED, and only once); a start that fails leaves the container EXITED with exit code 128
// and reason StartError, as containerd does, and the RUNNING event is sent only once RUNNING is
// recorded.
func (s *Service) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, storeError(err, "container "+req.GetContainerId())
	}
	if err := c.SetStarting(); err != nil {
		return nil, storeError(err, "container "+c.ID)
	}
	sb, err := s.sandboxes.Get(c.SandboxID)
	fail := func(code codes.Code, msg string) error {
		c.SetStartFailed(s.now().UnixNano(), msg)
		s.persistContainer(c)
		if sb != nil {
			s.emit(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb, c)
		}
		return status.Error(code, msg)
	}
	if err != nil {
		return nil, fail(codes.NotFound, "sandbox "+c.SandboxID+" of container "+c.ID+" not found")
	}
	if sb.Status().State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, fail(codes.FailedPrecondition, "sandbox container "+sb.ID+" is not running")
	}
	if err := createLogFile(c.LogPath); err != nil {
		return nil, fail(codes.Internal, "failed to start container "+c.ID+": "+err.Error())
	}
	img, _ := s.images.Store().Get(c.ImageID)
	p, err := s.launcher.Start(ctx, ProcessSpec{
		ContainerID: c.ID, SandboxID: sb.ID, Config: c.Config, SandboxConfig: sb.Config, Image: img,
		LogPath: c.LogPath, NetNS: sb.NetNS, PodIPs: sb.IPs,
	})
	if err != nil {
		return nil, fail(codes.Unknown, "failed to start containerd task "+c.ID+": "+err.Error())
	}
	c.SetRunning(s.now().UnixNano(), p)
	s.persistContainer(c)
	s.emit(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb, c)
	go s.monitor(sb, c, p)
	return &runtimeapi.StartContainerResponse{}, nil
}

// monitor records the end of a container's process, whoever caused it.
func (s *Service) monitor(sb *store.Sandbox, c *store.Container, p Process) {
	<-p.Done()
	e := p.Exit()
	at := e.At
	if at.IsZero() {
		at = s.now()
	}
	reason := e.Reason
	if reason == "" {
		reason = "Completed"
		if e.Code != 0 {
			reason = "Error"
		}
	}
	if c.SetExited(at.UnixNano(), e.Code, reason, e.Message) {
		s.persistContainer(c)
		s.emit(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb, c)
	}
}
