package runtime

import (
	"context"
	"errors"
	"math"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// StopContainer sends the stop signal and waits up to timeout seconds for the process to end,
// then kills it (timeout 0 kills at once), as containerd does. It returns as soon as the container
// is EXITED, before the timeout when the process ends on the signal. Stopping an unknown or an
// already stopped container succeeds (CRI idempotency; the kubelet tolerates NotFound but critest
// requires no error).
func (s *Service) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if errors.Is(err, store.ErrNotFound) {
		return &runtimeapi.StopContainerResponse{}, nil
	}
	if err != nil {
		return nil, storeError(err, "container "+req.GetContainerId())
	}
	if err := s.stopContainer(ctx, c, req.GetTimeout()); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// timeoutSeconds converts a CRI timeout in seconds (ExecSync, StopContainer) into a Duration;
// false means no timeout. containerd arms a deadline only for a timeout > 0
// (time.Duration(r.GetTimeout()) * time.Second), so 0 and less are none. A timeout past what a
// Duration holds (more than 9,223,372,036 s, ~292 years) is none too: seconds × time.Second would
// wrap, to a negative Duration (an immediate timeout) or a short positive one (issue 17).
func timeoutSeconds(t int64) (time.Duration, bool) {
	if t <= 0 || t > int64(math.MaxInt64/time.Second) {
		return 0, false
	}
	return time.Duration(t) * time.Second, true
}

func (s *Service) stopContainer(ctx context.Context, c *store.Container, timeout int64) error {
	sb, _ := s.sandboxes.Get(c.SandboxID)
	// exited waits for the container to become EXITED. When the task has already ended, the
	// exit is recorded right here, which saves waiting for the goroutine watching a task that
	// does not notify its exit to be scheduled.
	exited := func(t task.Task) <-chan struct{} {
		select {
		case <-t.Done():
			if sb != nil {
				s.recordExit(sb, c, t)
			}
		default:
		}
		return c.Exited()
	}
	if c.Status().State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	t := c.Task()
	if t == nil {
		return nil // exited between the two looks
	}
	if timeout > 0 {
		t.Kill(stopSignal(c))
		select {
		case <-exited(t):
			return nil // ended on the signal: no timer to arm
		default:
		}
		// A timeout too large for a Duration arms no kill timer (see timeoutSeconds): the
		// container has that long to stop, which is for ever.
		var expired <-chan time.Time
		if d, ok := timeoutSeconds(timeout); ok {
			t := time.NewTimer(d)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-exited(t):
			return nil
		case <-expired:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	t.Kill(syscall.SIGKILL)
	select {
	case <-exited(t):
		return nil
	case <-ctx.Done():
		return status.Errorf(codes.DeadlineExceeded, "container %s did not exit after SIGKILL: %v", c.ID, ctx.Err())
	}
}

// stopSignal is the container's stop signal: the config's (CRI ContainerConfig.stop_signal), else
// the image's, else SIGTERM (decided at CreateContainer).
func stopSignal(c *store.Container) syscall.Signal {
	if n, ok := signalNumbers[strings.TrimPrefix(c.StopSignal.String(), "SIGNAL_")]; ok {
		return n
	}
	return syscall.SIGTERM
}

// signalNumbers maps CRI Signal names to Linux numbers.
var signalNumbers = map[string]syscall.Signal{
	"SIGABRT": syscall.SIGABRT, "SIGALRM": syscall.SIGALRM, "SIGBUS": syscall.SIGBUS, "SIGCHLD": syscall.SIGCHLD,
	"SIGCONT": syscall.SIGCONT, "SIGFPE": syscall.SIGFPE, "SIGHUP": syscall.SIGHUP, "SIGILL": syscall.SIGILL,
	"SIGINT": syscall.SIGINT, "SIGIO": syscall.SIGIO, "SIGKILL": syscall.SIGKILL, "SIGPIPE": syscall.SIGPIPE,
	"SIGPROF": syscall.SIGPROF, "SIGQUIT": syscall.SIGQUIT, "SIGSEGV": syscall.SIGSEGV, "SIGSTOP": syscall.SIGSTOP,
	"SIGSYS": syscall.SIGSYS, "SIGTERM": syscall.SIGTERM, "SIGTRAP": syscall.SIGTRAP, "SIGTSTP": syscall.SIGTSTP,
	"SIGTTIN": syscall.SIGTTIN, "SIGTTOU": syscall.SIGTTOU, "SIGURG": syscall.SIGURG, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGVTALRM": syscall.SIGVTALRM, "SIGWINCH": syscall.SIGWINCH, "SIGXCPU": syscall.SIGXCPU,
	"SIGXFSZ": syscall.SIGXFSZ,
}

// signalName turns an image's StopSignal ("SIGQUIT", "QUIT", "3") into a CRI Signal.
func signalName(s string) runtimeapi.Signal {
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	if v, ok := runtimeapi.Signal_value["SIGNAL_"+s]; ok {
		return runtimeapi.Signal(v)
	}
	return runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT
}
