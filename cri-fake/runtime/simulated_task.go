package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// simTask is the Simulated launcher's task: a container's main process of cri-fake/process,
// started by delayedstart.Queue (or at once when anything needs it first), with its stdio wired to
// the CRI log and to attach sessions.
//
// A node keeps one per running container for the container's life, most of them dormant
// (simulated_dormant.go): what only a started process needs is in live, made when it starts,
// the exit is made when the task ends, and the channels when somebody waits (ready here, Done in
// task.ExitNotice). 30,000 of them took 28 MB of cri-fake/server's BenchmarkLargeNode's heap at
// 672 bytes each with two channels, a spec of 248 and the start time.
type simTask struct {
	sim      *Simulated
	spec     keptSpec
	procSpec *process.Spec // built by Start, or nil: begin builds it
	logs     containerio.LazyLog

	mu              sync.Mutex
	unstarted       bool                                // begin is still to be called (false once started or abandoned)
	isReady         bool                                // live is set or the task ended before it ran: materialise's waiters go on
	settled         atomic.Bool                         // unstarted was taken (started or abandoned): the start queue skips it
	doze            dozing                              // a process that only waits, kept dormant (simulated_dormant.go; under mu)
	ready           chan struct{}                       // made by a materialise that waits for another's start; closed once isReady
	live            *simLive                            // the started process (nil until begin, and for a task ended before)
	exit            *task.Exit                          // set before Ended
	task.ExitNotice                                     // the process reports its own end: the runtime keeps no goroutine per container
	res             *runtimeapi.LinuxContainerResources // the resources as last set (under mu; see Update)
}

// simLive is what a task's started process holds.
type simLive struct {
	proc      *process.Process     // the main process (set under mu)
	cio       *process.ContainerIO // its stdio
	startErr  error
	stdinOnce bool
	started   *runtimeapi.LinuxContainerResources // the ones the process was started with (under mu)
	fs        *process.FS                         // the started process's file system (under mu; see Update)
}

// keptSpec is what a task keeps of its task.Spec until its process starts (begin gives it back
// as one): the container's and the sandbox's configs packed, not the image's tags, the log path
// (logs has it) or the resources (res).
type keptSpec struct {
	containerID, sandboxID string
	packed                 task.PackedConfig        // Packed, or Config as it came (unpackedConfig)
	sandbox                task.PackedSandboxConfig // SandboxPacked, or SandboxConfig as it came (unpackedSandbox)
	imageID                string
	image                  *images.CatalogImage
	netNS                  string
	podIPs                 []string
	imageVolumes           map[string]images.Image
	realNetNS              bool
}

func keep(ts task.Spec) keptSpec {
	k := keptSpec{containerID: ts.ContainerID, sandboxID: ts.SandboxID, packed: ts.Packed, sandbox: ts.SandboxPacked,
		imageID: ts.Image.ID, image: ts.Image.Config, netNS: ts.NetNS, podIPs: ts.PodIPs, imageVolumes: ts.ImageVolumes, realNetNS: ts.RealNetNS}
	if ts.Packed == nil {
		k.packed = unpackedConfig{ts.Config}
	}
	if ts.SandboxPacked == nil {
		k.sandbox = unpackedSandbox{ts.SandboxConfig}
	}
	return k
}

// unpackedConfig and unpackedSandbox are configs that came unpacked, kept as they are (in the
// interface a packed one takes, which saves a field: 30,000 simTasks fit in a smaller size class).
type unpackedConfig struct{ cfg *runtimeapi.ContainerConfig }
type unpackedSandbox struct{ cfg *runtimeapi.PodSandboxConfig }

func (u unpackedConfig) Unpack() *runtimeapi.ContainerConfig   { return u.cfg }
func (u unpackedSandbox) Unpack() *runtimeapi.PodSandboxConfig { return u.cfg }

// taskSpec is the spec again, its configs unpacked.
func (k *keptSpec) taskSpec(res *runtimeapi.LinuxContainerResources) task.Spec {
	packed, sbPacked := k.packed, k.sandbox // nil again when they came unpacked
	if _, unpacked := packed.(unpackedConfig); unpacked {
		packed = nil
	}
	if _, unpacked := sbPacked.(unpackedSandbox); unpacked {
		sbPacked = nil
	}
	return task.Spec{ContainerID: k.containerID, SandboxID: k.sandboxID, Config: k.packed.Unpack(), Packed: packed,
		SandboxConfig: k.sandbox.Unpack(), SandboxPacked: sbPacked,
		Image: images.Image{ID: k.imageID, Config: k.image}, NetNS: k.netNS, RealNetNS: k.realNetNS, PodIPs: k.podIPs,
		Resources: res, ImageVolumes: k.imageVolumes}
}

// run starts the process and arranges for its end to flush the output and close done.
func (t *simTask) run(spec process.Spec) error {
	p, err := process.Start(context.Background(), spec)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.live.proc = p
	if t.res != t.live.started {
		p.UpdateResources(t.res) // an Update came between applyResources and now
	}
	t.mu.Unlock()
	p.AfterExit(func() {
		t.live.cio.Close() // ends attach sessions, flushes their last line
		t.logs.Close()     // flushes a last line without newline as a P record
		code, _ := p.ExitCode()
		t.exit = &task.Exit{Code: int32(code), At: p.FinishedAt(), Reason: exitReason(p)}
		t.Ended()
	})
	return nil
}

// begin starts the process: it builds the process spec when Start did not need to, and wires
// the process to the pod (network, PID namespace) and to the log and attach sessions. A panic
// on the way (a defect of cri-fake, met with this container's config) fails this start only.
func (t *simTask) begin(since time.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			t.sim.logf("container %s: starting its process crashed on a defect of cri-fake: %v\n%s", t.spec.containerID, r, debug.Stack())
			err = fmt.Errorf("cri-fake defect while starting the process: %v", r)
		}
	}()
	t.mu.Lock()
	live := &simLive{}
	t.live = live
	ts := t.spec.taskSpec(t.res)
	t.mu.Unlock()
	sim := t.sim
	live.stdinOnce = ts.Config.GetStdinOnce()
	var spec process.Spec
	if t.procSpec != nil {
		spec = *t.procSpec
	} else {
		var err error
		if spec, err = sim.processSpec(ts); err != nil {
			return err
		}
	}
	hostNetwork := ts.SandboxConfig.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	switch {
	case ts.RealNetNS && ts.NetNS != "" && !hostNetwork:
		spec.NetNS = ts.NetNS
	case ts.RealNetNS:
		// Host network with real namespaces: the servers listen in cri-fake's own
		// namespace, which is the node's.
	default:
		spec.Listen = sim.pod(ts.SandboxID).listen
	}
	pidns, err := sim.pidNamespace(ts)
	if err != nil {
		return err
	}
	spec.PIDNamespace = pidns
	spec.IPCNamespace = sim.ipcNamespace(ts)
	spec.CPU = sim.cpus
	t.applyResources(&spec)
	cio := process.NewContainerIO(nil, ts.Config.GetStdin(), ts.Config.GetTty())
	live.cio = cio // before ready is closed, which publishes it
	spec.Stdin = cio.Stdin()
	spec.Stdout = tee{cio.Stdout(), t.logs.Stream(process.Stdout)}
	spec.Stderr = tee{cio.Stderr(), t.logs.Stream(process.Stderr)}
	// A defect of the simulation ends only the process it hit (exit 139), reported here.
	spec.Logf = sim.Logf
	spec.StartedAt = since // a dormant process woken up runs as if it had since then
	if sim.SpecHook != nil {
		sim.SpecHook(ts.ContainerID, &spec)
	}
	return t.run(spec)
}

// materialise starts the process now if it has not started yet, and waits until it has (or
// failed to, or was killed before it could).
func (t *simTask) materialise() error {
	t.mu.Lock()
	unstarted := t.unstarted
	t.unstarted = false
	t.settled.Store(true)
	since := t.wakeLocked()
	if !unstarted {
		if !t.isReady && t.ready == nil {
			t.ready = make(chan struct{})
		}
		ready, isReady := t.ready, t.isReady
		t.mu.Unlock()
		if !isReady {
			<-ready
		}
		if live := t.live; live != nil {
			return live.startErr
		}
		return nil
	}
	t.mu.Unlock()
	if err := t.begin(since); err != nil {
		t.end(task.Exit{Code: 128, Reason: "StartError", Message: startError(err).Error(), At: time.Now()})
		t.live.startErr = err
		t.setReady()
		return err
	}
	t.setReady()
	return nil
}

// setReady lets materialise's waiters go on: the process started, failed to, or the task ended
// before it ran.
func (t *simTask) setReady() {
	t.mu.Lock()
	t.isReady = true
	ready := t.ready
	t.mu.Unlock()
	if ready != nil {
		close(ready)
	}
}

// end records the exit of a task whose process never ran.
func (t *simTask) end(e task.Exit) {
	if live := t.live; live != nil && live.cio != nil {
		live.cio.Close()
	}
	t.logs.Close()
	t.exit = &e
	t.Ended()
}

// tee writes the process's output to its attach sessions and to the log.
type tee struct{ a, b io.Writer }

func (t tee) Write(p []byte) (int, error) {
	t.a.Write(p)
	t.b.Write(p)
	return len(p), nil
}

// Kill signals the main process. A task stopped with TERM or KILL before its process started
// ends as a process killed before its command ran (128+signal), without its simulation being
// built, and a dormant one as its program would (process.Dormancy.Signalled); any other signal
// starts the process first.
func (t *simTask) Kill(sig syscall.Signal) error {
	if t.killDormant(sig) {
		return nil
	}
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		t.mu.Lock()
		if t.unstarted && !t.doze.on {
			t.unstarted = false
			t.settled.Store(true)
			t.mu.Unlock()
			t.end(task.Exit{Code: 128 + int32(sig), At: time.Now()})
			t.setReady()
			return nil
		}
		t.mu.Unlock()
	}
	t.materialise()
	p := t.process()
	if p == nil {
		return nil
	}
	if err := p.Signal(sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// process is the started process; nil before it starts, and for a task ended before it ran.
func (t *simTask) process() *process.Process {
	if t.live == nil {
		return nil
	}
	return t.live.proc
}

// Exit is how the task ended, once Done is closed.
func (t *simTask) Exit() task.Exit {
	if t.exit == nil {
		return task.Exit{}
	}
	return *t.exit
}

func (t *simTask) ReopenLog() error { return t.logs.Reopen() }

// crashedExec turns a panic met while an exec was being set up in the caller's goroutine (the
// command itself runs in the process's own goroutines, which end it with 139 themselves) into
// the exec's end with 139, as a command killed by SIGSEGV, so the RPC answers and cri-fake
// keeps serving.
func (t *simTask) crashedExec(cmd []string, code *int) {
	if r := recover(); r != nil {
		t.sim.logf("container %s: exec %q crashed on a defect of cri-fake and ends with exit code 139: %v\n%s", t.spec.containerID, cmd, r, debug.Stack())
		*code = 128 + int(syscall.SIGSEGV)
	}
}

// ExecSync runs cmd in the container; ctx carries ExecSync's timeout. Its output is bounded by
// process.MaxExecSyncOutput (containerd's cap).
func (t *simTask) ExecSync(ctx context.Context, cmd []string) (res task.ExecResult, err error) {
	var crashed int
	defer func() {
		if crashed != 0 {
			res, err = task.ExecResult{ExitCode: int32(crashed)}, nil
		}
	}()
	defer t.crashedExec(cmd, &crashed)
	t.materialise()
	p := t.process()
	if p == nil {
		return task.ExecResult{}, process.ErrNotRunning
	}
	stdout, stderr, code, err := p.ExecSync(ctx, cmd, 0)
	if err != nil {
		return task.ExecResult{}, err
	}
	return task.ExecResult{Stdout: stdout, Stderr: stderr, ExitCode: int32(code)}, nil
}

// Usage is the process's own resource figures (ContainerStats).
func (t *simTask) Usage() (task.Usage, error) {
	if u, ok := t.dormantUsage(); ok {
		return u, nil
	}
	t.materialise() // at most the start latency early
	p := t.process()
	if p == nil {
		return task.Usage{}, nil
	}
	st := p.Stats()
	return task.Usage{MemoryBytes: st.MemoryBytes, CPUNanos: st.CPUNanos, CPUNanoCores: st.CPUNanoCores, WritableLayerBytes: st.WritableLayerBytes}, nil
}

// Exec runs an interactive command (the streaming server's Exec).
func (t *simTask) Exec(ctx context.Context, cmd []string, in io.Reader, out, errw io.Writer, tty bool, resize <-chan task.TerminalSize) (code int, err error) {
	var crashed int
	defer func() {
		if crashed != 0 {
			code, err = crashed, nil
		}
	}()
	defer t.crashedExec(cmd, &crashed)
	t.materialise()
	p := t.process()
	if p == nil {
		return 0, process.ErrNotRunning
	}
	e, err := p.Exec(ctx, process.ExecSpec{Args: cmd, Stdin: in, Stdout: out, Stderr: errw, TTY: tty})
	if err != nil {
		return 0, err
	}
	go forwardResize(resize, e.Done(), e.Resize)
	select {
	case <-e.Done():
	case <-ctx.Done():
		e.Signal(syscall.SIGKILL)
		<-e.Done()
		return 0, ctx.Err()
	}
	code, _ = e.ExitCode()
	return code, nil
}

// Attach connects a session to the main process's stdio (containerd's stdinOnce rules).
func (t *simTask) Attach(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan task.TerminalSize) error {
	t.materialise()
	p := t.process()
	if p == nil {
		return process.ErrNotRunning
	}
	go forwardResize(resize, t.Done(), p.Resize)
	return t.live.cio.Attach(ctx, in, out, errw, t.live.stdinOnce)
}

func forwardResize(resize <-chan task.TerminalSize, done <-chan struct{}, set func(w, h uint16)) {
	if resize == nil {
		return
	}
	for {
		select {
		case sz, ok := <-resize:
			if !ok {
				return
			}
			set(sz.Width, sz.Height)
		case <-done:
			return
		}
	}
}
