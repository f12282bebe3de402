package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// ioDrain bounds how long, after a process has ended, its output is still read: a process it
// left behind (a host-PID container's, an exec's background child) may hold the pipe open.
const ioDrain = 2 * time.Second

// programTask is a program container's task: runc's container and the init process cri-fake
// waits for.
type programTask struct {
	l    *Launcher
	spec task.Spec
	b    bundle
	proc *specs.Process // the container's process, which an exec's starts from

	log *containerio.LogWriter
	cio *containerio.ContainerIO
	// The container's standard streams: pipes (the R ends read here, the W ends given to runc),
	// or a terminal's master.
	stdoutR, stdoutW, stderrR, stderrW, stdinR, stdinW *os.File
	master                                             *os.File
	copies                                             sync.WaitGroup

	pid  int
	done chan struct{}
	exit task.Exit
	task.ExitNotice

	mu      sync.Mutex
	lastCPU uint64
	lastAt  time.Time
}

func newProgramTask(l *Launcher, ts task.Spec, b bundle, spec *specs.Spec) (*programTask, error) {
	t := &programTask{l: l, spec: ts, b: b, proc: spec.Process, done: make(chan struct{})}
	if ts.LogPath != "" {
		var err error
		if t.log, err = containerio.NewLogWriter(ts.LogPath); err != nil {
			return nil, fmt.Errorf("failed to create container log %s: %w", ts.LogPath, err)
		}
	}
	t.cio = containerio.NewContainerIO(t.log, ts.Config.GetStdin(), ts.Config.GetTty())
	return t, nil
}

// create has runc create the container with its standard streams: pipes, or a terminal whose
// master runc sends over a console socket.
func (t *programTask) create(ctx context.Context) error {
	var io Stdio
	var console *consoleSocket
	masters := make(chan *os.File, 1)
	if t.spec.Config.GetTty() {
		var err error
		if console, err = newConsoleSocket(""); err != nil {
			return err
		}
		defer console.Close()
		io.ConsoleSocket = console.Path()
		go func() {
			m, _ := console.Receive()
			masters <- m
		}()
	} else {
		var err error
		if t.stdoutR, t.stdoutW, err = os.Pipe(); err != nil {
			return err
		}
		if t.stderrR, t.stderrW, err = os.Pipe(); err != nil {
			t.closePipes()
			return err
		}
		if t.spec.Config.GetStdin() {
			if t.stdinR, t.stdinW, err = os.Pipe(); err != nil {
				t.closePipes()
				return err
			}
		}
		io = Stdio{Stdin: t.stdinR, Stdout: t.stdoutW, Stderr: t.stderrW}
	}
	pid, err := t.l.runc.Create(ctx, t.spec.ContainerID, t.b.dir, io)
	// The write ends (and stdin's read end) now belong to the container.
	closeAll(t.stdoutW, t.stderrW, t.stdinR)
	t.stdoutW, t.stderrW, t.stdinR = nil, nil, nil
	if err != nil {
		t.closePipes()
		t.closeLog()
		return err
	}
	t.pid = pid
	if console != nil {
		select {
		case t.master = <-masters:
		case <-time.After(10 * time.Second):
		}
		if t.master == nil {
			t.abandon(ctx)
			return errors.New("runc sent no terminal over the console socket")
		}
		t.copy(t.cio.Stdout(), t.master)
		if in := t.cio.Stdin(); in != nil {
			go io2(t.master, in, false)
		}
		return nil
	}
	t.copy(t.cio.Stdout(), t.stdoutR)
	t.copy(t.cio.Stderr(), t.stderrR)
	if in := t.cio.Stdin(); in != nil {
		go io2(t.stdinW, in, true)
	}
	return nil
}

// io2 copies a session's input into the container; closeAfter closes the container's stdin at
// the end of it (the pipe; a terminal stays).
func io2(dst *os.File, src io.Reader, closeAfter bool) {
	_, _ = io.Copy(dst, src)
	if closeAfter {
		dst.Close()
	}
}

func (t *programTask) copy(dst io.Writer, src *os.File) {
	t.copies.Add(1)
	go func() {
		defer t.copies.Done()
		_, _ = io.Copy(dst, src)
	}()
}

// abandon deletes a container whose start failed.
func (t *programTask) abandon(ctx context.Context) {
	if err := t.l.runc.Delete(ctx, t.spec.ContainerID, true); err != nil && !NotFound(err) {
		t.l.opts.Logf("delete container %s after its failed start: %v", t.spec.ContainerID, err)
	}
	t.closePipes()
	t.closeLog()
}

func (t *programTask) closePipes() {
	closeAll(t.stdoutR, t.stdoutW, t.stderrR, t.stderrW, t.stdinR, t.stdinW, t.master)
}

func (t *programTask) closeLog() {
	t.cio.Close()
	if t.log != nil {
		t.log.Close()
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// wait waits for the container's init to end, then records its exit: 128+signal for a signal,
// OOMKilled when the memory cgroup's OOM killer killed in it, as containerd reports from its
// TaskOOM event. Its runc container (and cgroup) is deleted before the exit is reported, as
// containerd deletes the task when it handles the exit.
func (t *programTask) wait() {
	code, err := waitExit(t.pid)
	e := task.Exit{Code: code}
	if err != nil {
		e.Message = err.Error()
	}
	if t.l.cg.oomKills(t.spec.ContainerID) > 0 {
		e.Reason = "OOMKilled"
	}
	e.At = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := t.l.runc.Delete(ctx, t.spec.ContainerID, true); err != nil && !NotFound(err) {
		t.l.opts.Logf("delete container %s after its exit: %v", t.spec.ContainerID, err)
	}
	t.drain()
	t.closeLog()
	t.exit = e
	close(t.done)
	t.Ended()
}

// drain lets the output copies finish, for ioDrain at most, then closes the streams.
func (t *programTask) drain() {
	copied := make(chan struct{})
	go func() {
		t.copies.Wait()
		close(copied)
	}()
	select {
	case <-copied:
	case <-time.After(ioDrain):
	}
	t.closePipes()
	<-copied
}

// Kill is `runc kill`; a container that has ended (or was deleted) is not an error.
func (t *programTask) Kill(sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := t.l.runc.Kill(ctx, t.spec.ContainerID, sig)
	if err != nil && (NotRunning(err) || NotFound(err)) {
		return nil
	}
	select {
	case <-t.done:
		return nil
	default:
	}
	return err
}

func (t *programTask) Done() <-chan struct{} { return t.done }
func (t *programTask) Exit() task.Exit       { return t.exit }

// ExecSync runs cmd with `runc exec` and collects its output (at most
// process.MaxExecSyncOutput of both streams together, as the simulation and containerd keep).
func (t *programTask) ExecSync(ctx context.Context, cmd []string) (task.ExecResult, error) {
	out := kernel.NewCappedOutput(kernel.MaxExecSyncOutput)
	code, err := t.exec(ctx, cmd, nil, &out.Stdout, &out.Stderr, false, nil)
	return task.ExecResult{Stdout: out.Stdout.Bytes(), Stderr: out.Stderr.Bytes(), ExitCode: code}, err
}

// Exec runs cmd with a streaming session's streams.
func (t *programTask) Exec(ctx context.Context, cmd []string, in io.Reader, out, errw io.Writer, tty bool, resizes <-chan task.TerminalSize) (int, error) {
	code, err := t.exec(ctx, cmd, in, out, errw, tty, resizes)
	return int(code), err
}

// exec is an exec process: the container's process with cmd as its arguments (containerd's
// exec spec), started detached by runc and waited for here; one still running when ctx ends is
// killed.
func (t *programTask) exec(ctx context.Context, cmd []string, in io.Reader, out, errw io.Writer, tty bool, resizes <-chan task.TerminalSize) (int32, error) {
	var idb [8]byte
	rand.Read(idb[:])
	execID := hex.EncodeToString(idb[:])
	proc := *t.proc
	proc.Args, proc.Terminal = slices.Clone(cmd), tty
	proc.ConsoleSize = nil
	var (
		stdio               Stdio
		ends                []*os.File // the ends given to runc, closed once it has returned
		outR, errR, inW, ma *os.File
		console             *consoleSocket
		masters             = make(chan *os.File, 1)
		err                 error
	)
	if tty {
		if console, err = newConsoleSocket(""); err != nil {
			return 0, err
		}
		defer console.Close()
		stdio.ConsoleSocket = console.Path()
		go func() {
			m, _ := console.Receive()
			masters <- m
		}()
	} else {
		var outW, errW, inR *os.File
		if outR, outW, err = os.Pipe(); err != nil {
			return 0, err
		}
		if errR, errW, err = os.Pipe(); err != nil {
			closeAll(outR, outW)
			return 0, err
		}
		ends = append(ends, outW, errW)
		if in != nil {
			if inR, inW, err = os.Pipe(); err != nil {
				closeAll(outR, outW, errR, errW)
				return 0, err
			}
			ends = append(ends, inR)
		}
		stdio = Stdio{Stdin: inR, Stdout: outW, Stderr: errW}
	}
	runcCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	pid, err := t.l.runc.Exec(runcCtx, t.spec.ContainerID, execID, t.b.dir, &proc, stdio)
	cancel()
	closeAll(ends...)
	if err != nil {
		closeAll(outR, errR, inW)
		return 0, fmt.Errorf("failed to start exec %q: OCI runtime exec failed: %w: unknown", execID, err)
	}
	var copies sync.WaitGroup
	copyOut := func(dst io.Writer, src *os.File) {
		copies.Add(1)
		go func() {
			defer copies.Done()
			if dst == nil {
				dst = io.Discard
			}
			_, _ = io.Copy(dst, src)
		}()
	}
	if tty {
		select {
		case ma = <-masters:
		case <-time.After(10 * time.Second):
		}
		if ma == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			waitExit(pid)
			return 0, fmt.Errorf("failed to start exec %q: runc sent no terminal over the console socket", execID)
		}
		defer ma.Close()
		copyOut(out, ma)
		if in != nil {
			go io2(ma, in, false)
		}
		if resizes != nil {
			go func() {
				for sz := range resizes {
					resize(ma, sz.Width, sz.Height)
				}
			}()
		}
	} else {
		copyOut(out, outR)
		copyOut(errw, errR)
		if in != nil {
			go io2(inW, in, true)
		}
	}
	exited := make(chan int32, 1)
	go func() {
		code, _ := waitExit(pid)
		exited <- code
	}()
	var code int32
	select {
	case code = <-exited:
	case <-ctx.Done():
		syscall.Kill(pid, syscall.SIGKILL) // still our unreaped child: the pid is its own
		code = <-exited
		err = ctx.Err()
	}
	drained := make(chan struct{})
	go func() {
		copies.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(ioDrain):
	}
	closeAll(outR, errR, inW, ma)
	<-drained
	return code, err
}

// Attach connects a session to the container's main process: its output as it comes, its
// input when the container has stdin.
func (t *programTask) Attach(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resizes <-chan task.TerminalSize) error {
	if t.master != nil && resizes != nil {
		go func() {
			for sz := range resizes {
				resize(t.master, sz.Width, sz.Height)
			}
		}()
	}
	return t.cio.Attach(ctx, in, out, errw, t.spec.Config.GetStdinOnce())
}

// Usage is the container's cgroup figures; the CPU rate is over the time since the last call,
// as containerd computes usage_nano_cores between two samples.
func (t *programTask) Usage() (task.Usage, error) {
	select {
	case <-t.done:
		return task.Usage{}, errors.ErrUnsupported
	default:
	}
	u, err := t.l.cg.usage(t.spec.ContainerID)
	if err != nil {
		return task.Usage{}, err
	}
	now := time.Now()
	t.mu.Lock()
	var nano uint64
	if !t.lastAt.IsZero() && u.cpuNanos >= t.lastCPU {
		if dt := now.Sub(t.lastAt); dt > 0 {
			nano = uint64(float64(u.cpuNanos-t.lastCPU) / dt.Seconds())
		}
	}
	t.lastCPU, t.lastAt = u.cpuNanos, now
	t.mu.Unlock()
	return task.Usage{
		Measured: true, MemoryBytes: u.workingSet, CPUNanos: u.cpuNanos, CPUNanoCores: nano,
		UsageBytes: u.usageBytes, RSSBytes: u.rss, PageFaults: u.pageFaults, MajorPageFaults: u.majorFaults,
		WritableLayerBytes: dirBytes(t.b.rootfs(), 10000),
	}, nil
}

// Update hands new resources to runc (`runc update`), which writes the cgroup files.
func (t *programTask) Update(r *runtimeapi.LinuxContainerResources) {
	cpu, mem := resources(r)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := t.l.runc.Update(ctx, t.spec.ContainerID, &specs.LinuxResources{CPU: cpu, Memory: mem}); err != nil {
		t.l.opts.Logf("update the resources of container %s: %v", t.spec.ContainerID, err)
	}
}

// ReopenLog starts a new log file after the kubelet's rotation.
func (t *programTask) ReopenLog() error {
	if t.log == nil {
		return errors.ErrUnsupported
	}
	return t.log.Reopen()
}

// dirBytes is what the regular files under dir hold, counting at most limit entries (a
// container's writable root: bounded work per stats call whatever it writes).
func dirBytes(dir string, limit int) uint64 {
	var total uint64
	n := 0
	var walk func(string)
	walk = func(d string) {
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		for _, e := range ents {
			if n++; n > limit {
				return
			}
			if e.IsDir() {
				walk(d + "/" + e.Name())
			} else if e.Type().IsRegular() {
				if info, err := e.Info(); err == nil {
					total += uint64(info.Size())
				}
			}
		}
	}
	walk(dir)
	return total
}
