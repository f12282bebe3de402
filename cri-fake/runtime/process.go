package runtime

import (
	"context"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
)

// Process is what runs in a started container. cri-fake runs no real processes: the default
// Launcher gives every container a process that runs until it is stopped; the process simulation
// (cri-fake/process) plugs in through Options.Launcher and makes containers do things.
type Process interface {
	// Signal delivers a signal. After SIGKILL the process must end promptly.
	Signal(sig syscall.Signal) error
	// Done is closed once the process has ended.
	Done() <-chan struct{}
	// Exit tells how it ended; it is valid once Done is closed.
	Exit() Exit
}

// Exit is the end of a process.
type Exit struct {
	Code int32
	// Reason is "Completed" for code 0 and "Error" otherwise when left empty (containerd's rule);
	// "OOMKilled" and the like are the process's to say.
	Reason  string
	Message string
	// At is when the process ended; zero means when the runtime noticed.
	At time.Time
}

// ProcessSpec is everything a launcher may need to start a container's process.
type ProcessSpec struct {
	ContainerID   string
	SandboxID     string
	Config        *runtimeapi.ContainerConfig
	SandboxConfig *runtimeapi.PodSandboxConfig
	// Image is the resolved image, with its catalog entry (entrypoint, cmd, env, user, behavior).
	Image images.Image
	// LogPath is the absolute CRI log file path ("" when the kubelet gave none). The process
	// creates the file and writes its output there in the CRI log format.
	LogPath string
	NetNS   string
	// RealNetNS is true when NetNS is a real network namespace (--netns=real) that servers can
	// listen in; otherwise NetNS is a placeholder file (or empty for host-network pods).
	RealNetNS bool
	PodIPs    []string
	// Restored is true when the container was RUNNING before cri-fake restarted.
	Restored bool
	// Resources are the container's Linux resources as last set (CreateContainer's, or
	// UpdateContainerResources' since); nil means Config's.
	Resources *runtimeapi.LinuxContainerResources
}

// Launcher starts container processes.
type Launcher interface {
	Start(ctx context.Context, spec ProcessSpec) (Process, error)
}

// Validator is an optional Launcher extension checked at CreateContainer, so a command that
// cannot run fails the create the way containerd reports "executable file not found".
type Validator interface {
	Validate(spec ProcessSpec) error
}

// Passive is an optional Process extension. A process whose Passive method reports true ends
// only when the runtime signals it, so the runtime records its exit right after signalling
// instead of watching it with a goroutine (which, on a busy node, costs a thread wake-up per
// container start).
type Passive interface {
	Passive() bool
}

// ExitNotifier is an optional Process extension: instead of the runtime watching Done with a
// goroutine per container, the process calls f once it has ended (after Done is closed). f may
// run on any goroutine, including inside Signal.
type ExitNotifier interface {
	NotifyExit(f func())
}

// Execer is an optional Process extension: ExecSync runs a command inside the container. The
// context carries ExecSync's timeout; a command still running when it expires must be stopped
// and the context's error returned.
type Execer interface {
	ExecSync(ctx context.Context, cmd []string) (ExecResult, error)
}

// ExecResult is what a synchronous exec produced.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}

// Streaming hands out the URLs of Exec, Attach and PortForward sessions: the subset of
// k8s.io/cri-streaming's streaming.Server the runtime calls (that server, built over the process
// simulation, satisfies it as it is).
type Streaming interface {
	GetExec(*runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	GetAttach(*runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	GetPortForward(*runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// Usage is a process's own resource figures.
type Usage struct {
	MemoryBytes, CPUNanos, WritableLayerBytes uint64
}

// UsageReporter is an optional Process extension: ContainerStats reports its figures instead of
// the synthetic ones.
type UsageReporter interface {
	Usage() Usage
}

// TerminalSize is a TTY size change from a streaming session.
type TerminalSize struct{ Width, Height uint16 }

// StreamExecer is an optional Process extension for the streaming server's Exec (crictl exec -it,
// kubectl exec): it runs cmd with the session's streams and returns its exit code.
type StreamExecer interface {
	ExecStream(ctx context.Context, cmd []string, in io.Reader, out, errw io.Writer, tty bool, resize <-chan TerminalSize) (int, error)
}

// Attacher is an optional Process extension for the streaming server's Attach: the session is
// connected to the main process's stdio until it ends.
type Attacher interface {
	Attach(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error
}

// PortDialer is an optional Launcher extension for PortForward: it connects to a port of a
// sandbox's network, where the container servers listen.
type PortDialer interface {
	DialPort(ctx context.Context, sandboxID, netns string, realNetNS bool, port int32) (net.Conn, error)
}

// Releaser is an optional Launcher extension: the runtime tells it when a container is removed
// and when a sandbox stops, so it can drop what it keeps for them.
type Releaser interface {
	ReleaseContainer(id string)
	ReleaseSandbox(id string)
}

// ResourceUpdater is an optional Process extension: UpdateContainerResources hands the new
// resources of a started container to its process.
type ResourceUpdater interface {
	UpdateResources(r *runtimeapi.LinuxContainerResources)
}

// LogReopener is an optional Process extension for ReopenContainerLog.
type LogReopener interface {
	ReopenLog() error
}

// UntilStopped is the default Launcher: the process writes nothing (and so creates no log file),
// uses no resources beyond the synthetic stats, and ends only when signalled: the stop signal ends it cleanly (exit 0,
// "Completed", like a well-behaved server), SIGKILL with 137 (128+9, "Error").
type UntilStopped struct{}

// Start returns a process that runs until stopped.
func (UntilStopped) Start(context.Context, ProcessSpec) (Process, error) {
	return &untilStopped{done: make(chan struct{})}, nil
}

type untilStopped struct {
	once sync.Once
	done chan struct{}
	exit Exit
}

func (p *untilStopped) Signal(sig syscall.Signal) error {
	p.once.Do(func() {
		p.exit = Exit{At: time.Now()}
		if sig == syscall.SIGKILL {
			p.exit.Code = 128 + int32(syscall.SIGKILL)
		}
		close(p.done)
	})
	return nil
}

func (p *untilStopped) Done() <-chan struct{} { return p.done }
func (p *untilStopped) Passive() bool         { return true }
func (p *untilStopped) Exit() Exit            { return p.exit }
