package runtime

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// runningContainer finds a container that exec and attach can reach: it must be RUNNING
// (containerd: "container is in CREATED state").
func (s *Service) runningContainer(id string) (*store.Container, error) {
	c, err := s.containers.Get(id)
	if err != nil {
		return nil, storeError(err, "container "+id)
	}
	if st := c.Status().State; st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, notRunning(c, st)
	}
	return c, nil
}

// runningTask is the task of a container that exec and attach can reach.
func (s *Service) runningTask(id string) (*store.Container, task.Task, error) {
	c, err := s.runningContainer(id)
	if err != nil {
		return nil, nil, err
	}
	t := c.Task()
	if t == nil { // exited since runningContainer looked
		return nil, nil, notRunning(c, c.Status().State)
	}
	return c, t, nil
}

func notRunning(c *store.Container, st runtimeapi.ContainerState) error {
	return status.Errorf(codes.FailedPrecondition, "container %s is in %s state: exec and attach need a running container", c.ID, stateName(st))
}

func stateName(s runtimeapi.ContainerState) string {
	n := s.String()
	if len(n) > len("CONTAINER_") {
		return n[len("CONTAINER_"):]
	}
	return n
}

// ExecSync runs a command in a running container through its task, under the request's timeout
// (0, or one too large for a Duration: none). A timed-out command is an error with
// DeadlineExceeded, which is how the kubelet's exec probes and critest see containerd's. A task
// that cannot exec answers Unimplemented.
func (s *Service) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	c, t, err := s.runningTask(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "cmd is empty: give the command to run")
	}
	if d, ok := timeoutSeconds(req.GetTimeout()); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	res, err := t.ExecSync(ctx, req.GetCmd())
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil, status.Error(codes.Unimplemented, "ExecSync: "+noProcesses)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, status.Errorf(codes.DeadlineExceeded, "failed to exec in container %s: timeout %ds exceeded: %v", c.ID, req.GetTimeout(), err)
	case errors.Is(err, context.Canceled):
		return nil, status.FromContextError(err).Err()
	case err != nil:
		return nil, status.Errorf(codes.Unknown, "failed to exec in container %s: %v", c.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode}, nil
}

// Exec returns the URL of an exec session from the streaming server.
func (s *Service) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := s.runningContainer(req.GetContainerId()); err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "cmd is empty: give the command to run")
	}
	if s.opts.Streaming == nil {
		return nil, status.Error(codes.Unimplemented, "Exec: "+noProcesses)
	}
	return s.opts.Streaming.GetExec(req)
}

// Attach returns the URL of an attach session from the streaming server.
func (s *Service) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := s.runningContainer(req.GetContainerId()); err != nil {
		return nil, err
	}
	if s.opts.Streaming == nil {
		return nil, status.Error(codes.Unimplemented, "Attach: "+noProcesses)
	}
	return s.opts.Streaming.GetAttach(req)
}

// PortForward returns the URL of a port-forward session into a READY sandbox.
func (s *Service) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, storeError(err, "sandbox "+req.GetPodSandboxId())
	}
	if sb.Status().State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready: port-forward needs a READY sandbox", sb.ID)
	}
	if s.opts.Streaming == nil {
		return nil, status.Error(codes.Unimplemented, "PortForward: "+noProcesses)
	}
	return s.opts.Streaming.GetPortForward(req)
}
