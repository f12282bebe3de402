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

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// simTask is the Simulated launcher's task: a container's main process of cri-fake/process,
// started by delayedStarts (or at once when anything needs it first), with its stdio wired to
// the CRI log and to attach sessions.
type simTask struct {
	sim       *Simulated
	spec      task.Spec
	procSpec  *process.Spec        // built by Start, or nil: begin builds it
	cio       *process.ContainerIO // made when the process starts
	logs      containerio.LazyLog
	stdinOnce bool

	mu        sync.Mutex
	unstarted bool        // begin is still to be called (false once started or abandoned)
	startAt   time.Time   // when delayedStarts starts it
	settled   atomic.Bool // unstarted was taken (started or abandoned): delayedStarts skips it
	doze      dozing      // a process that only waits, kept dormant (simulated_dormant.go; under mu)

	ready           chan struct{}    // proc or startErr is set (proc stays nil for a task killed before it ran)
	proc            *process.Process // the main process
	startErr        error
	done            chan struct{} // the process ended and its output is flushed; exit is set
	exit            task.Exit
	task.ExitNotice // the process reports its own end: the runtime keeps no goroutine per container

	res     *runtimeapi.LinuxContainerResources // the resources as last set (under mu; see Update)
	started *runtimeapi.LinuxContainerResources // the ones the process was started with (under mu)
	fs      *process.FS                         // the started process's file system (under mu; see Update)
}

// run starts the process and arranges for its end to flush the output and close done.
func (t *simTask) run(spec process.Spec) error {
	p, err := process.Start(context.Background(), spec)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.proc = p
	if t.res != t.started {
		p.UpdateResources(t.res) // an Update came between applyResources and now
	}
	t.mu.Unlock()
	p.AfterExit(func() {
		t.cio.Close()  // ends attach sessions, flushes their last line
		t.logs.Close() // flushes a last line without newline as a P record
		code, _ := p.ExitCode()
		t.exit = task.Exit{Code: int32(code), At: p.FinishedAt(), Reason: exitReason(p)}
		t.closeDone()
	})
	return nil
}

// begin starts the process: it builds the process spec when Start did not need to, and wires
// the process to the pod (network, PID namespace) and to the log and attach sessions. A panic
// on the way (a defect of cri-fake, met with this container's config) fails this start only.
func (t *simTask) begin(since time.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			t.sim.logf("container %s: starting its process crashed on a defect of cri-fake: %v\n%s", t.spec.ContainerID, r, debug.Stack())
			err = fmt.Errorf("cri-fake defect while starting the process: %v", r)
		}
	}()
	sim, ts := t.sim, t.spec
	if ts.Config == nil {
		ts.Config = ts.Packed.Unpack() // Start dropped it
	}
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
	t.cio = cio // before ready is closed, which publishes it
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
	t.mu.Unlock()
	if !unstarted {
		<-t.ready
		return t.startErr
	}
	if err := t.begin(since); err != nil {
		t.end(task.Exit{Code: 128, Reason: "StartError", Message: startError(err).Error(), At: time.Now()})
		t.startErr = err
		close(t.ready)
		return err
	}
	close(t.ready)
	return nil
}

// end records the exit of a task whose process never ran.
func (t *simTask) end(e task.Exit) {
	if t.cio != nil {
		t.cio.Close()
	}
	t.logs.Close()
	t.exit = e
	t.closeDone()
}

// tee writes the process's output to its attach sessions and to the log.
type tee struct{ a, b io.Writer }

func (t tee) Write(p []byte) (int, error) {
	t.a.Write(p)
	t.b.Write(p)
	return len(p), nil
}

// closeDone marks the end (exit must be set) and reports it.
func (t *simTask) closeDone() {
	close(t.done)
	t.Ended()
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
			close(t.ready)
			return nil
		}
		t.mu.Unlock()
	}
	t.materialise()
	if t.proc == nil {
		return nil
	}
	if err := t.proc.Signal(sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Done is closed once the process has ended and its output is flushed to the log.
func (t *simTask) Done() <-chan struct{} { return t.done }

func (t *simTask) Exit() task.Exit { return t.exit }

func (t *simTask) ReopenLog() error { return t.logs.Reopen() }

// crashedExec turns a panic met while an exec was being set up in the caller's goroutine (the
// command itself runs in the process's own goroutines, which end it with 139 themselves) into
// the exec's end with 139, as a command killed by SIGSEGV, so the RPC answers and cri-fake
// keeps serving.
func (t *simTask) crashedExec(cmd []string, code *int) {
	if r := recover(); r != nil {
		t.sim.logf("container %s: exec %q crashed on a defect of cri-fake and ends with exit code 139: %v\n%s", t.spec.ContainerID, cmd, r, debug.Stack())
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
	if t.proc == nil {
		return task.ExecResult{}, process.ErrNotRunning
	}
	stdout, stderr, code, err := t.proc.ExecSync(ctx, cmd, 0)
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
	if t.proc == nil {
		return task.Usage{}, nil
	}
	st := t.proc.Stats()
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
	if t.proc == nil {
		return 0, process.ErrNotRunning
	}
	e, err := t.proc.Exec(ctx, process.ExecSpec{Args: cmd, Stdin: in, Stdout: out, Stderr: errw, TTY: tty})
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
	if t.proc == nil {
		return process.ErrNotRunning
	}
	go forwardResize(resize, t.done, t.proc.Resize)
	return t.cio.Attach(ctx, in, out, errw, t.stdinOnce)
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
