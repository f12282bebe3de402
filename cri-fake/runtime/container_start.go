package runtime

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/cri-fake/task"
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
	img, _ := s.images.Store().Get(c.ImageID)
	// Stamped before the launch: a task may run to its end before Start returns (printf does,
	// under load), and its exit time must not come before its start.
	startedAt := s.now().UnixNano()
	spec := s.taskSpec(sb, c.ContainerSpec, img)
	spec.Resources = c.Status().Resources
	t, err := s.launcher.Start(ctx, spec)
	if err != nil {
		return nil, fail(codes.Unknown, "failed to start containerd task "+c.ID+": "+err.Error())
	}
	c.SetRunning(startedAt, t)
	s.persistContainer(c)
	s.emit(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb, c)
	s.watch(sb, c, t)
	return &runtimeapi.StartContainerResponse{}, nil
}

// watch arranges for the end of a task to be recorded, whoever causes it: by the task's own
// notification, else by a goroutine waiting on Done.
//
// The log file at LogPath belongs to the task: it is created when the task first writes (the
// process simulation does), not here. A silent task leaves no file; the kubelet's log manager
// then calls ReopenContainerLog, which creates it. Creating an empty file for every container
// would cost more than all of the runtime's bookkeeping for a pod lifecycle.
func (s *Service) watch(sb *store.Sandbox, c *store.Container, t task.Task) {
	if t.NotifyExit(func() { s.recordExit(sb, c, t) }) {
		return
	}
	go func() {
		<-t.Done()
		s.recordExit(sb, c, t)
	}()
}

// recordExit moves the container to EXITED with the task's exit; it is idempotent.
func (s *Service) recordExit(sb *store.Sandbox, c *store.Container, t task.Task) {
	s.exits.RLock()
	defer s.exits.RUnlock()
	if s.closing.Load() {
		return // killed by Close: the container stays RUNNING in the saved state
	}
	e := t.Exit()
	at := e.At
	if at.IsZero() {
		at = s.now()
	}
	// A launcher's clock may differ from the runtime's: a container never finishes before it
	// started (StartedAt is set before the task is watched).
	if started := c.Status().StartedAt; at.UnixNano() < started {
		at = time.Unix(0, started)
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
