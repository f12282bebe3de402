package runtime

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

// Launcher starts the tasks of containers (see cri-fake/task for the vocabulary). cri-fake runs
// no real processes: NewSimulated, the default, backs each task with a simulated process of
// cri-fake/process; UntilStopped's tasks run silently until stopped. Embed UntilStopped in a
// launcher of your own to write only Start.
type Launcher interface {
	// Validate is called at CreateContainer, so a command that cannot run fails the create the
	// way containerd reports "executable file not found".
	Validate(spec task.Spec) error
	// Start starts the container's task (StartContainer, and a restore of a RUNNING container).
	Start(ctx context.Context, spec task.Spec) (task.Task, error)
	// DialPort connects to a port of a sandbox's network, where the container servers listen
	// (PortForward); errors.ErrUnsupported fails the session.
	DialPort(ctx context.Context, sandboxID, netns string, realNetNS bool, port int32) (net.Conn, error)
	// ReleaseContainer and ReleaseSandbox are told when a container is removed and when a
	// sandbox stops, so the launcher can drop what it keeps for them.
	ReleaseContainer(id string)
	ReleaseSandbox(id string)
}

// Streaming hands out the URLs of Exec, Attach and PortForward sessions: the subset of
// k8s.io/cri-streaming's streaming.Server the runtime calls (that server, built over the
// runtime's sessions, satisfies it as it is).
type Streaming interface {
	GetExec(*runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	GetAttach(*runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	GetPortForward(*runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// UntilStopped is the minimal Launcher: its tasks write nothing (and so create no log file), use
// no resources beyond the synthetic stats, cannot exec, attach or port-forward, and end only when
// killed: the stop signal ends them cleanly (exit 0, "Completed", like a well-behaved server),
// SIGKILL with 137 (128+9, "Error").
type UntilStopped struct{}

// Validate accepts every container.
func (UntilStopped) Validate(task.Spec) error { return nil }

// Start returns a task that runs until stopped.
func (UntilStopped) Start(context.Context, task.Spec) (task.Task, error) {
	return &untilStopped{}, nil
}

// DialPort is unsupported: nothing listens.
func (UntilStopped) DialPort(context.Context, string, string, bool, int32) (net.Conn, error) {
	return nil, errors.ErrUnsupported
}

// ReleaseContainer keeps nothing to release.
func (UntilStopped) ReleaseContainer(string) {}

// ReleaseSandbox keeps nothing to release.
func (UntilStopped) ReleaseSandbox(string) {}

type untilStopped struct {
	task.Unsupported
	task.ExitNotice // the task ends only in Kill, which reports it: no goroutine waits for it

	once sync.Once
	exit task.Exit
}

// Kill ends the task on its first signal and reports the end before returning.
func (t *untilStopped) Kill(sig syscall.Signal) error {
	t.once.Do(func() {
		t.exit = task.Exit{At: time.Now()}
		if sig == syscall.SIGKILL {
			t.exit.Code = 128 + int32(syscall.SIGKILL)
		}
		t.Ended()
	})
	return nil
}

func (t *untilStopped) Exit() task.Exit { return t.exit }

// NotifyExit is task.ExitNotice's, not task.Unsupported's.
func (t *untilStopped) NotifyExit(f func()) bool { return t.ExitNotice.NotifyExit(f) }
