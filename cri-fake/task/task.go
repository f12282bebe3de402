// Package task is the contract between cri-fake's runtime and what runs in its containers.
//
// The vocabulary, one name per idea:
//
//   - A task is the runtime's handle on a started container's main process, as in containerd
//     (whose CRI server starts, kills, waits on, execs in and updates a containerd.Task). The
//     runtime gets one from its Launcher at StartContainer, keeps it in the container's store
//     record (store.Container.Task) while the container is RUNNING, and every later CRI call on
//     the container goes through it.
//   - A Spec is what a launcher is told to start a task from: the container's and sandbox's
//     configs, the resolved image, the log path, the network.
//   - A process is a simulated process of cri-fake/process (process.Process). The default
//     launcher, runtime.Simulated, backs each task with one: the container's main process, in
//     which ExecSync and exec sessions run their commands.
//
// A task has to end when killed and tell how it ended (Kill, Done, Exit); everything else it may
// decline with errors.ErrUnsupported, which the runtime answers as for a container that cannot
// do it (each method says how). Embed Unsupported to decline all of them.
package task

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
)

// Task is a started container's main process, as the runtime drives it.
type Task interface {
	// Kill delivers a signal (StopContainer's stop signal, then SIGKILL). After SIGKILL the task
	// must end promptly.
	Kill(sig syscall.Signal) error
	// Done is closed once the task has ended.
	Done() <-chan struct{}
	// Exit tells how it ended; it is valid once Done is closed.
	Exit() Exit
	// NotifyExit asks the task to call f once it has ended (after Done is closed; at once if it
	// already has). f may run on any goroutine, including inside Kill. A task that cannot
	// returns false, and the runtime then watches Done with a goroutine of its own.
	NotifyExit(f func()) bool

	// ExecSync runs cmd in the container (ExecSync, exec probes). The context carries ExecSync's
	// timeout; a command still running when it expires must be stopped and the context's error
	// returned. ErrUnsupported answers Unimplemented.
	ExecSync(ctx context.Context, cmd []string) (ExecResult, error)
	// Exec runs cmd with a streaming session's streams (crictl exec -it, kubectl exec) and
	// returns its exit code; out and errw may be nil. ErrUnsupported fails the session.
	Exec(ctx context.Context, cmd []string, in io.Reader, out, errw io.Writer, tty bool, resize <-chan TerminalSize) (int, error)
	// Attach connects a streaming session to the main process's stdio until the session or the
	// task ends. ErrUnsupported fails the session.
	Attach(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error
	// Usage is the task's own resource figures for ContainerStats; ErrUnsupported leaves the
	// runtime's synthetic figures.
	Usage() (Usage, error)
	// Update hands UpdateContainerResources' new resources to the task.
	Update(r *runtimeapi.LinuxContainerResources)
	// ReopenLog starts a new log file at the log path (ReopenContainerLog after the kubelet's
	// rotation); ErrUnsupported has the runtime create the file itself.
	ReopenLog() error
}

// Unsupported declines every optional part of Task: embed it in a task that only runs until it
// is killed, and write Kill, Done and Exit.
type Unsupported struct{}

// NotifyExit reports false: the runtime watches Done.
func (Unsupported) NotifyExit(func()) bool { return false }

// ExecSync is unsupported.
func (Unsupported) ExecSync(context.Context, []string) (ExecResult, error) {
	return ExecResult{}, errors.ErrUnsupported
}

// Exec is unsupported.
func (Unsupported) Exec(context.Context, []string, io.Reader, io.Writer, io.Writer, bool, <-chan TerminalSize) (int, error) {
	return 0, errors.ErrUnsupported
}

// Attach is unsupported.
func (Unsupported) Attach(context.Context, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan TerminalSize) error {
	return errors.ErrUnsupported
}

// Usage is unsupported.
func (Unsupported) Usage() (Usage, error) { return Usage{}, errors.ErrUnsupported }

// Update ignores the resources.
func (Unsupported) Update(*runtimeapi.LinuxContainerResources) {}

// ReopenLog is unsupported.
func (Unsupported) ReopenLog() error { return errors.ErrUnsupported }

// Exit is the end of a task.
type Exit struct {
	Code int32
	// Reason is "Completed" for code 0 and "Error" otherwise when left empty (containerd's rule);
	// "OOMKilled" and the like are the task's to say.
	Reason  string
	Message string
	// At is when the task ended; zero means when the runtime noticed.
	At time.Time
}

// ExecResult is what a synchronous exec produced.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}

// Usage is a task's own resource figures.
type Usage struct {
	MemoryBytes, CPUNanos, WritableLayerBytes uint64
	// CPUNanoCores is the CPU rate since the previous Usage (containerd's UsageNanoCores).
	CPUNanoCores uint64
	// Measured says the figures are the kernel's (a program container's cgroup, cri-fake/oci):
	// the runtime reports them as they are, with the fields below, instead of its synthetic
	// model. MemoryBytes is then the working set.
	Measured                                          bool
	UsageBytes, RSSBytes, PageFaults, MajorPageFaults uint64
}

// TerminalSize is a TTY size change from a streaming session.
type TerminalSize struct{ Width, Height uint16 }

// Spec is everything a launcher may need to start a container's task.
type Spec struct {
	ContainerID string
	SandboxID   string
	// RuntimeHandler is the sandbox's runtime handler (its RuntimeClass's; "" the default).
	RuntimeHandler string
	Config         *runtimeapi.ContainerConfig
	// Packed is Config as the runtime keeps it (nil when the spec was not made by the runtime):
	// a launcher that keeps the spec for the task's life may drop Config and Unpack this again
	// when it needs it, instead of holding the whole tree meanwhile.
	Packed        PackedConfig
	SandboxConfig *runtimeapi.PodSandboxConfig
	// SandboxPacked is SandboxConfig as the runtime keeps it (nil when the spec was not made by
	// the runtime): a launcher that keeps the spec for the task's life may drop SandboxConfig and
	// Unpack this again when it needs it, as with Packed.
	SandboxPacked PackedSandboxConfig
	// Image is the resolved image, with its catalog entry (entrypoint, cmd, env, user, behavior).
	Image images.Image
	// LogPath is the absolute CRI log file path ("" when the kubelet gave none). The task
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
	// ImageVolumes are the images the container's image volumes (Mount.image) name, by the
	// reference in the mount (ImageSpec.image); nil when it has none.
	ImageVolumes map[string]images.Image
}

// PackedConfig is a container config kept packed (store.PackedConfig), unpacked on demand.
type PackedConfig interface {
	// Unpack returns the whole config; its maps and messages may be shared: never change them.
	Unpack() *runtimeapi.ContainerConfig
}

// PackedSandboxConfig is a sandbox config kept packed (store.PackedSandboxConfig), unpacked on
// demand.
type PackedSandboxConfig interface {
	// Unpack returns the whole config; its maps and messages may be shared: never change them.
	Unpack() *runtimeapi.PodSandboxConfig
}

// ExitNotice is a task's Done and NotifyExit for a task that knows when it ends: embed it, and
// call Ended once the task has ended (its Exit set), which closes Done and runs the callback the
// runtime left. Done's channel is made only when somebody asks for it before the end: most tasks
// are never waited on (the runtime takes NotifyExit), and a node of 30,000 containers saved a
// channel (96 bytes) each (cri-fake/server's BenchmarkLargeNode).
type ExitNotice struct {
	mu     sync.Mutex
	over   bool
	done   chan struct{} // made by Done, closed by Ended
	onExit func()
}

// Done is closed once Ended has been called.
func (n *ExitNotice) Done() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		n.done = make(chan struct{})
		if n.over {
			close(n.done)
		}
	}
	return n.done
}

// NotifyExit calls f once the task has ended (at once if it already has).
func (n *ExitNotice) NotifyExit(f func()) bool {
	n.mu.Lock()
	if !n.over {
		n.onExit = f
		n.mu.Unlock()
		return true
	}
	n.mu.Unlock()
	f()
	return true
}

// Ended closes Done and runs the callback, if any, once.
func (n *ExitNotice) Ended() {
	n.mu.Lock()
	if n.over {
		n.mu.Unlock()
		return
	}
	n.over = true
	if n.done != nil {
		close(n.done)
	}
	f := n.onExit
	n.onExit = nil
	n.mu.Unlock()
	if f != nil {
		f()
	}
}
