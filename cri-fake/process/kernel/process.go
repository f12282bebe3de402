package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/process/kernel/ipcns"
	"github.com/plugsim/plugsim/cri-fake/process/sched"
	"github.com/plugsim/plugsim/cri-fake/process/seccomp"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// Identity is who a container's processes run as (LinuxContainerSecurityContext).
type Identity struct {
	UID int
	GID int
	// AdditionalGIDs are the supplemental groups (shown by `id -G` after the primary gid).
	AdditionalGIDs []int
	// Username, when set, is the name `id -n`/`whoami` print; otherwise the
	// name is looked up in the container's /etc/passwd, as busybox does.
	Username string
	// Capabilities is the bounding set by name ("CAP_NET_ADMIN" or "NET_ADMIN").
	// nil means the default set containerd grants; see EffectiveCapabilities.
	// Its effective part is enforced by the simulated system calls
	// (capabilities.go) and shown in /proc/<pid>/status.
	Capabilities []string
	Privileged   bool
	// NoNewPrivs is shown in /proc/<pid>/status; exec then does not honour
	// set-user-ID programs (execIdentity).
	NoNewPrivs bool

	// euid is the effective uid when setuid is set: a set-user-ID program's
	// owner (execIdentity).
	euid   int
	setuid bool
}

// ExitBehaviour makes the container's main process exit with Code after After,
// whatever its command is doing (the image catalog's "exit with code N after a delay").
type ExitBehaviour struct {
	Code  int
	After time.Duration
}

// Behaviour is scripted, per-image behaviour from the image catalog.
type Behaviour struct {
	// Exit ends the main process with a given code after a delay.
	Exit *ExitBehaviour
	// CrashOnStart ends the main process at once with Exit.Code (default 1) and
	// a message on stderr, before the command runs.
	CrashOnStart bool
	// LinesPerSecond makes the main process print that many numbered lines per
	// second on stdout, besides its command.
	LinesPerSecond int
	// FailReadiness makes the simulated servers answer 503 on health paths
	// (/healthz, /readyz, /ready, /health) and the ReadinessFailing accessor true.
	FailReadiness bool
	// MemoryBytes is added to the memory the process reports in Stats.
	MemoryBytes uint64
}

// Spec is everything needed to run a container's main process.
type Spec struct {
	// Args is the resolved command: entrypoint + cmd from the image, overridden
	// by the container config (the runtime resolves that, as containerd does).
	Args []string
	// Env is KEY=VALUE; PATH defaults to the usual busybox PATH when absent.
	Env        []string
	WorkingDir string
	Identity   Identity
	Hostname   string
	// FS is the container's file system view (NewFS). nil means a fresh busybox view.
	FS *vfs.FS
	// Stdin, Stdout and Stderr may be nil (empty input, discarded output). The
	// writers are called from several goroutines but never concurrently.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// TTY emulates a terminal: input is echoed, CR becomes LF, ^C sends SIGINT,
	// ^D ends input, output LF becomes CRLF; stderr is merged into stdout.
	TTY bool
	// NetNS is the network namespace path the servers listen in; empty means
	// the host's (the current) namespace.
	NetNS string
	// Listen, when set, replaces the servers' listening (for example an in-memory
	// listener for a runtime without real network namespaces). NetNS is ignored.
	Listen func(network, address string) (net.Listener, error)
	// Behaviour is the image catalog's scripted behaviour.
	Behaviour Behaviour
	// PIDNamespace is the process table to join: nil gives the container its
	// own (its main process is pid 1). Share one per pod for PID mode POD and
	// one per node for NODE (hostPID).
	PIDNamespace *PIDNamespace
	// CPUs is what nproc prints (default 2).
	CPUs int
	// CPU is the node's CPUs the container's processes run on (NewCPUScheduler; one per runtime,
	// which the containers share fairly, see cpu.go); nil gives the container CPUs of its own.
	CPU *CPUScheduler
	// CPUQuota per CPUPeriod is the container's CPU bandwidth (cpu_quota and cpu_period of its
	// resources, cgroup v2 cpu.max): its processes hold CPUs for at most CPUQuota in each
	// CPUPeriod. CPUQuota 0 is no limit; CPUPeriod 0 means 100 ms, the kernel's default.
	CPUQuota, CPUPeriod time.Duration
	// InitSignalRule applies the kernel's rule for a PID namespace's init
	// (pid 1): a signal it has no handler for is ignored (KILL excepted), and
	// it is delivered to pid 1 alone, so a shell's trap runs only after its
	// foreground command finishes. Off by default: TERM then ends a shell
	// without a trap (143) and interrupts its sleep, which keeps
	// StopContainer fast.
	InitSignalRule bool
	// PidsLimit is the most processes the container may have at once (its pids cgroup's
	// pids.max); past it a fork fails with EAGAIN (sh: "can't fork: Resource temporarily
	// unavailable"). 0 means DefaultPidsLimit. FromCRI takes it from the container's resources.
	PidsLimit int
	// MemoryLimit is the container's memory limit in bytes (memory_limit_in_bytes; 0: none):
	// past it the OOM killer ends the container (memory.go).
	MemoryLimit int64
	// CPUShares is the container's cpu_shares, which /sys/fs/cgroup/cpu.weight shows in runc's
	// cgroup v2 conversion (cgroupfs.go); the simulation's CPUs share fairly without it.
	CPUShares int64
	// OOMScoreAdj is /proc/<pid>/oom_score_adj of the container's processes (the CRI's
	// oom_score_adj, which the kubelet derives from the pod's QoS class).
	OOMScoreAdj int64
	// IPCNamespace is the System V IPC namespace to join: nil gives the container its own.
	// Share one per pod for IPC mode POD and the node's (ipcns.NewNode) for NODE.
	IPCNamespace *ipcns.Namespace
	// Seccomp is the container's seccomp filter, run at the top of each simulated system call
	// (kernel/seccomp.go); nil means none (Seccomp: 0 in /proc/<pid>/status).
	Seccomp *seccomp.Filter
	// Refused, when set, is why the OCI runtime would refuse to create the container's task
	// (runc refusing its seccomp profile): StartWith fails with it, and the runtime reports it
	// from StartContainer.
	Refused *seccomp.CompileError
	// Logf receives the report, with its stack, of a defect of the simulation that ended one of
	// the container's processes (a panic, turned into that process's exit with code 139); nil
	// means the standard logger.
	Logf func(format string, args ...any)
	// StartedAt, when set and past, is when the main process started: a runtime that kept a
	// dormant process (Dormant: one that only waits) without simulating it, until something
	// looked at it, starts it as if it had run since then. Its process table entry, StartedAt and
	// CPU time count from it, and its program's Proc.Elapsed is the time already run (sleep waits
	// only for the rest).
	StartedAt time.Time
}

// ExecSpec is a command run in a running container (ExecSync, Exec): same
// file system, environment, identity and namespaces as the main process.
type ExecSpec struct {
	Args []string
	// Env is added to the container's environment.
	Env    []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
}

// ExecError is what a missing or unrunnable executable gives, worded like runc's
// ("exec: \"foo\": executable file not found in $PATH"); containerd wraps it into
// StartContainer and ExecSync errors.
type ExecError struct {
	Name string
	Err  error
}

// ErrNotFound is the Err of an ExecError for a command not found in $PATH.
var ErrNotFound = errors.New("executable file not found in $PATH")

func (e *ExecError) Error() string {
	if errors.Is(e.Err, ErrNotFound) {
		return fmt.Sprintf("exec: %q: %v", e.Name, ErrNotFound)
	}
	var pe interface{ Unwrap() error }
	if errors.As(e.Err, &pe) {
		if errors.Is(e.Err, syscall.ENOENT) {
			return fmt.Sprintf("exec: %q: stat %s: no such file or directory", e.Name, e.Name)
		}
		if errors.Is(e.Err, syscall.EACCES) {
			return fmt.Sprintf("exec: %q: permission denied", e.Name)
		}
	}
	return fmt.Sprintf("exec: %q: %v", e.Name, e.Err)
}

func (e *ExecError) Unwrap() error { return e.Err }

// ErrNotRunning is returned by Exec when the container's main process has ended.
var ErrNotRunning = errors.New("container is not running")

// ErrExecTimeout is returned by ExecSync when the command outlived its timeout.
var ErrExecTimeout = errors.New("command timed out")

// ProcessInfo is one row of the container's process table.
type ProcessInfo struct {
	// Name is the command name (comm), which pgrep and pidof match.
	Name    string
	PID     int
	PPID    int
	Args    []string
	UID     int
	Started time.Time
}

// Stats are the figures the runtime reports in ContainerStats.
type Stats struct {
	// MemoryBytes is the simulated resident memory of all processes.
	MemoryBytes uint64
	// CPUNanos is the simulated CPU time consumed so far (monotonic): what its processes held
	// the node's CPUs for (cpu.go) plus a plausible 1 ms per second per process.
	CPUNanos uint64
	// CPUNanoCores is CPUNanos's rate since the previous Stats, or since the start for the first
	// (containerd computes UsageNanoCores from its previous sample likewise).
	CPUNanoCores uint64
	// WritableLayerBytes is what was written to the container's own layer.
	WritableLayerBytes uint64
	// Processes is the number of live processes.
	Processes int
}

// container is what the main process and its execs share.
type container struct {
	fs        *vfs.FS
	spec      Spec
	hostname  string
	readiness bool
	// applets is what the container's executables run (applettable.go).
	applets *AppletSet

	pidns *PIDNamespace
	ipcns *ipcns.Namespace
	mem   memoryCgroup
	cpu   *sched.Group
	cg    cgroupState // what /sys/fs/cgroup shows of the CPU and oom_score_adj as last set (cgroupfs.go)
	// procs is how many processes of this container hold a pid slot (table entries and
	// pipeline subshells), guarded by pidns.mu; see pidsLimit.
	procs int

	// netdev are the network devices its processes added (netdev.go).
	netdev netDevices

	mu      sync.Mutex
	dead    bool
	cpuTime time.Duration // the plausible idle CPU time Stats adds (1 ms/s per process)
	cpuAt   time.Time
	// the previous Stats's CPU time and when it was taken (its rate, CPUNanoCores)
	statsCPU time.Duration
	statsAt  time.Time
}

// Process is a running simulated process: a container's main process (Start)
// or a command executed in it (Exec).
type Process struct {
	c    *container
	t    *task
	done chan struct{}

	mu         sync.Mutex
	exitCode   int
	exited     bool
	startedAt  time.Time
	finishedAt time.Time
	gates      []*gate
	onFinish   []func()
	afterExit  []func() // AfterExit's callbacks, called once done is closed
	width      uint16
	height     uint16
}

// StartWith is Start with the table of applets the container's executables
// run.
func StartWith(ctx context.Context, spec Spec, applets *AppletSet) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(spec.Args) == 0 {
		return nil, errors.New("no command specified")
	}
	if spec.FS == nil {
		return nil, errors.New("process: no file system view (Spec.FS)")
	}
	if spec.Refused != nil {
		return nil, spec.Refused
	}
	if spec.CPUs <= 0 {
		spec.CPUs = 2
	}
	env := withDefaultEnv(spec.Env, spec.Hostname, spec.Identity)
	now := time.Now()
	if spec.StartedAt.Before(now) && !spec.StartedAt.IsZero() {
		now = spec.StartedAt
	}
	c := &container{fs: spec.FS, spec: spec, hostname: spec.Hostname, pidns: spec.PIDNamespace, cpuAt: now, statsAt: now, applets: applets}
	if c.pidns == nil {
		c.pidns = NewPIDNamespace()
	}
	c.ipcns = spec.IPCNamespace
	c.startMemoryCgroup()
	c.startCPUGroup()
	if c.hostname == "" {
		c.hostname = "localhost"
	}
	c.readiness = !spec.Behaviour.FailReadiness
	c.fs.SetProc(c.procFile, c.procPids)
	c.cg.cpu = cpuResources{Shares: spec.CPUShares, Quota: spec.CPUQuota.Microseconds(), Period: spec.CPUPeriod.Microseconds()}
	c.cg.oomScoreAdj = spec.OOMScoreAdj
	c.fs.SetSys(sysTree{c})
	wd := spec.WorkingDir
	if wd == "" {
		wd = "/"
	}
	exe, err := c.lookPath(spec.Args[0], env, wd)
	if err != nil {
		return nil, err
	}
	p, err := c.run(exe, spec.Args, env, wd, spec.Stdin, spec.Stdout, spec.Stderr, spec.TTY, true)
	if err == nil {
		c.checkMemoryAtStart()
	}
	return p, err
}

// Lookup reports whether args[0] can be run in fsys with env's PATH, returning
// the same *ExecError Start would. A runtime can call it at CreateContainer.
func Lookup(fsys *vfs.FS, args, env []string, workingDir string) error {
	_, err := LookupExecutable(fsys, args, env, workingDir)
	return err
}

// LookupExecutable is Lookup, with what args[0] resolves to (an applet, or a script).
func LookupExecutable(fsys *vfs.FS, args, env []string, workingDir string) (vfs.Executable, error) {
	if len(args) == 0 {
		return vfs.Executable{}, errors.New("no command specified")
	}
	c := &container{fs: fsys}
	if workingDir == "" {
		workingDir = "/"
	}
	return c.lookPath(args[0], withDefaultEnv(env, "", Identity{}), workingDir)
}

func withDefaultEnv(env []string, hostname string, id Identity) []string {
	out := append([]string(nil), env...)
	has := func(k string) bool {
		for _, kv := range out {
			if strings.HasPrefix(kv, k+"=") {
				return true
			}
		}
		return false
	}
	if !has("PATH") {
		out = append(out, "PATH="+vfs.DefaultPath)
	}
	if !has("HOSTNAME") && hostname != "" {
		out = append(out, "HOSTNAME="+hostname)
	}
	if !has("HOME") {
		home := "/root"
		if id.UID != 0 {
			home = "/"
		}
		out = append(out, "HOME="+home)
	}
	return out
}

func envGet(env []string, k string) string {
	v, _ := envLookup(env, k)
	return v
}

func envLookup(env []string, k string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v, true
		}
	}
	return "", false
}

// lookPath resolves name like execvp in the container: a name with a slash is a
// path (relative to wd), anything else is searched in PATH; applets that exist
// only as shell builtins are not files.
func (c *container) lookPath(name string, env []string, wd string) (vfs.Executable, error) {
	if name == "" {
		return vfs.Executable{}, &ExecError{Name: name, Err: ErrNotFound}
	}
	if strings.Contains(name, "/") {
		p := name
		if !strings.HasPrefix(p, "/") {
			p = wd + "/" + p
		}
		exe, err := c.fs.LookExec(p)
		if err != nil {
			return vfs.Executable{}, &ExecError{Name: name, Err: err}
		}
		return exe, nil
	}
	path, ok := envLookup(env, "PATH")
	if !ok {
		path = vfs.DefaultPath // execvp's (and busybox ash's) default when PATH is unset
	}
	var denied error
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if !strings.HasPrefix(p, "/") {
			p = wd + "/" + p
		}
		exe, err := c.fs.LookExec(p)
		if err == nil {
			return exe, nil
		}
		if errors.Is(err, syscall.EACCES) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return vfs.Executable{}, &ExecError{Name: name, Err: denied}
	}
	return vfs.Executable{}, &ExecError{Name: name, Err: ErrNotFound}
}

// gate drops writes once its process has ended, so a goroutine that has not yet
// noticed a KILL cannot write to a log that belongs to a dead process.
type gate struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
	// dead is the writing task's context: once it ends (a kill, a seccomp KILL verdict) the
	// process is gone even before finish closes the gate, so what it still "writes" is
	// dropped, as a killed process writes nothing.
	dead context.Context
}

func (g *gate) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.w == nil || (g.dead != nil && g.dead.Err() != nil) {
		return len(b), nil
	}
	return g.w.Write(b)
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (c *container) run(exe vfs.Executable, args, env []string, wd string, stdin io.Reader, stdout, stderr io.Writer, tty, main bool) (*Process, error) {
	start := time.Now()
	if main && c.spec.StartedAt.Before(start) && !c.spec.StartedAt.IsZero() {
		start = c.spec.StartedAt // a dormant process woken up (Spec.StartedAt)
	}
	p := &Process{c: c, done: make(chan struct{}), startedAt: start}
	out, errw := &gate{w: stdout}, &gate{w: stderr}
	p.gates = []*gate{out, errw}
	var in io.Reader = stdin
	var sout, serr io.Writer = out, errw
	var ttyIn *containerio.TTY
	if tty {
		if stdin == nil {
			// A terminal nobody types into never ends: reads block until the
			// process ends (a TTY container without stdin keeps its shell).
			r, w := io.Pipe()
			stdin = r
			p.onFinish = append(p.onFinish, func() { w.Close() })
		}
		ttyIn = containerio.NewTTY(stdin, out)
		in = ttyIn
		sout = &containerio.CRLFWriter{W: out}
		serr = sout
	}
	if in == nil {
		in = strings.NewReader("")
	}
	id := c.spec.Identity.execIdentity(exe)
	t, err := c.newTask(nil, args, id)
	if err != nil {
		return nil, err
	}
	p.t = t
	out.dead, errw.dead = t.ctx, t.ctx
	if main {
		c.pidns.mu.Lock()
		t.started = start
		c.pidns.mu.Unlock()
	}
	t.chargeImage(args, env)
	if ttyIn != nil {
		ttyIn.Interrupt = func() { t.signal(syscall.SIGINT) }
		ttyIn.Start()
	}
	pr := &Proc{t: t, c: c, th: c.cpu.NewThread(), Args: args, Env: env, Dir: wd, Stdin: in, Stdout: sout, Stderr: serr, TTY: tty, Exe: exe, elapsed: time.Since(start)}
	// The process ends when its program returns or when its context ends (a kill, or pid 1 of
	// its namespace ending), whichever comes first, even if the program does not notice the
	// context. The context is watched with context.AfterFunc rather than by a goroutine per
	// process: a node of 30,000 sleeping containers held 30,000 such goroutines.
	var once sync.Once
	end := func(code int) { once.Do(func() { p.finish(code, main) }) }
	stopWatch := context.AfterFunc(t.ctx, func() {
		code, _ := ExitCause(t.ctx)
		end(code)
	})
	returned := func(code int) {
		if ec, ok := ExitCause(t.ctx); ok {
			code = ec
		}
		stopWatch()
		end(code)
	}
	if b := c.spec.Behaviour; main && b.CrashOnStart {
		code := 1
		if b.Exit != nil && b.Exit.Code != 0 {
			code = b.Exit.Code
		}
		fmt.Fprintf(serr, "%s: simulated crash on start (image behaviour)\n", args[0])
		go returned(code)
	} else {
		go func() {
			// A panic skips returned: recoverCrash ends the task, whose context's end
			// finishes the process.
			defer t.recoverCrash()
			defer pr.Idle() // also when it panics
			code := pr.RunExecutable()
			pr.Idle() // its CPU is given back before its end is reported, as before
			returned(code)
		}()
		if main {
			c.startBehaviour(p, pr)
		}
	}
	return p, nil
}

func (p *Process) finish(code int, main bool) {
	for _, g := range p.gates {
		g.close()
	}
	for _, f := range p.onFinish {
		f()
	}
	c := p.c
	p.t.exit(code)
	if main {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
		// The container's processes end with it; when it was pid 1 of its
		// namespace (a private one, or the pod's pause) every process of
		// the namespace is killed, as the kernel does.
		rest := c.ownTasks()
		if p.t.pid == 1 {
			rest = c.nsTasks()
		}
		for _, t := range rest {
			t.terminate(137)
		}
	}
	p.mu.Lock()
	p.exitCode = code
	p.exited = true
	p.finishedAt = time.Now()
	after := p.afterExit
	p.afterExit = nil
	p.mu.Unlock()
	close(p.done)
	for _, f := range after {
		go f()
	}
}

// AfterExit calls f, in a goroutine of its own, once the process has ended (Done is closed and
// ExitCode and FinishedAt answer), or at once if it has already ended: a runtime learns of each
// container's end without a goroutine waiting on Done for each one.
func (p *Process) AfterExit(f func()) {
	p.mu.Lock()
	if !p.exited {
		p.afterExit = append(p.afterExit, f)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go func() {
		<-p.done // finish sets exited just before it closes done
		f()
	}()
}

func (c *container) startBehaviour(p *Process, pr *Proc) {
	b := c.spec.Behaviour
	if b.Exit != nil {
		go func() {
			defer p.t.recoverCrash()
			timer := time.NewTimer(b.Exit.After)
			defer timer.Stop()
			select {
			case <-timer.C:
				p.t.terminate(b.Exit.Code)
			case <-p.t.ctx.Done():
			}
		}()
	}
	if b.LinesPerSecond > 0 {
		go func() {
			defer p.t.recoverCrash()
			tick := time.NewTicker(time.Second / time.Duration(b.LinesPerSecond))
			defer tick.Stop()
			for n := 1; ; n++ {
				select {
				case <-tick.C:
					fmt.Fprintf(pr.Stdout, "%s line %d\n", time.Now().UTC().Format(time.RFC3339Nano), n)
				case <-p.t.ctx.Done():
					return
				}
			}
		}()
	}
}

// Pid is the process id inside the container (1 for the main process).
func (p *Process) Pid() int { return p.t.pid }

// Signal delivers sig. TERM (and INT, HUP, ...) ends a process with 128+sig
// unless it handles it: a shell `trap` runs its action (the running foreground
// command, such as sleep, is interrupted first), servers shut down cleanly and
// exit 0. KILL always ends it with 137. Signalling an ended process returns
// syscall.ESRCH.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return syscall.ESRCH
	default:
	}
	p.t.signal(sig)
	return nil
}

// Ended is why the process's context ended (context.Canceled once a signal
// or its exit ended it; cancelled synchronously, before Done is closed), nil
// while it runs.
func (p *Process) Ended() error { return p.t.ctx.Err() }

// HasSignalHandler reports whether the process installed a handler for its
// signals (a shell's trap).
func (p *Process) HasSignalHandler() bool {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	return p.t.handler != nil
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the process ends and returns its exit code.
func (p *Process) Wait() int {
	<-p.done
	code, _ := p.ExitCode()
	return code
}

// ExitCode returns the exit code and whether the process has ended. A process
// ended by signal N reports 128+N (137 for KILL), as runtimes report it.
func (p *Process) ExitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.exited
}

// StartedAt and FinishedAt are the process's start and end times.
func (p *Process) StartedAt() time.Time { return p.startedAt }

// FinishedAt is zero while the process runs.
func (p *Process) FinishedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finishedAt
}

// Resize records a terminal size change from the streaming server's resize
// channel. No applet lays out output by width, so the size is only kept.
func (p *Process) Resize(width, height uint16) {
	p.mu.Lock()
	p.width, p.height = width, height
	p.mu.Unlock()
}

// ReadinessFailing reports the image behaviour FailReadiness.
func (p *Process) ReadinessFailing() bool { return !p.c.readiness }

// FS is the container's file system.
func (p *Process) FS() *vfs.FS { return p.c.fs }

// Exec runs another command in the same container (ExecSync, Exec). It fails
// with ErrNotRunning when the main process has ended and with an *ExecError
// when the executable cannot be found. ctx bounds only the start; end the
// process with Signal (ExecSync's timeout does that, see ExecSync).
func (p *Process) Exec(ctx context.Context, spec ExecSpec) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := p.c
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return nil, ErrNotRunning
	}
	if len(spec.Args) == 0 {
		return nil, errors.New("no command specified")
	}
	env := append(withDefaultEnv(c.spec.Env, c.spec.Hostname, c.spec.Identity), spec.Env...)
	wd := c.spec.WorkingDir
	if wd == "" {
		wd = "/"
	}
	exe, err := c.lookPath(spec.Args[0], env, wd)
	if err != nil {
		return nil, err
	}
	e, err := c.run(exe, spec.Args, env, wd, spec.Stdin, spec.Stdout, spec.Stderr, spec.TTY, false)
	if errors.Is(err, syscall.EAGAIN) {
		// The container is at its pids limit: runc's exec fails to fork.
		return nil, &ExecError{Name: spec.Args[0], Err: err}
	}
	return e, err
}

// MaxExecSyncOutput is the most ExecSync keeps of a command's stdout and stderr together: 16 MiB,
// the largest message the kubelet's CRI client accepts (k8s.io/cri-client maxMsgSize) and the
// cap containerd puts on each stream (internal/cri/server/container_execsync.go, cappedWriter
// with maxStreamSize). Like containerd, output past it is dropped without a marker while the
// command runs on; a response that big no longer fits in one CRI message, so the caller gets
// ResourceExhausted from gRPC as it does from containerd. Nothing past the cap is kept, so a
// `cat /dev/zero` costs at most this much memory however long it runs.
const MaxExecSyncOutput = 16 << 20

// ExecSync runs args in the container and collects its output (at most
// MaxExecSyncOutput of stdout and stderr together). With a positive timeout a
// command still running after it is killed (it disappears from the process
// table, as critest's "execSync with timeout" checks with pgrep) and
// ErrExecTimeout is returned with the output so far.
func (p *Process) ExecSync(ctx context.Context, args []string, timeout time.Duration) (stdout, stderr []byte, exitCode int, err error) {
	out := NewCappedOutput(MaxExecSyncOutput)
	so, se := &out.Stdout, &out.Stderr
	e, err := p.Exec(ctx, ExecSpec{Args: args, Stdout: so, Stderr: se})
	if err != nil {
		return nil, nil, 0, err
	}
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-e.Done():
	case <-expire:
		_ = e.Signal(syscall.SIGKILL)
		<-e.Done()
		code, _ := e.ExitCode()
		return so.Bytes(), se.Bytes(), code, ErrExecTimeout
	case <-ctx.Done():
		_ = e.Signal(syscall.SIGKILL)
		<-e.Done()
		code, _ := e.ExitCode()
		return so.Bytes(), se.Bytes(), code, ctx.Err()
	}
	code, _ := e.ExitCode()
	return so.Bytes(), se.Bytes(), code, nil
}

// ExecStream runs args with the given streams until it ends (streaming
// Exec: `crictl exec -it`, `kubectl exec`). When ctx ends first the command
// is killed and ctx's error returned. A non-zero exit code is not an error
// here: the streaming server wants it as an exec.CodeExitError.
func (p *Process) ExecStream(ctx context.Context, args []string, in io.Reader, out, errw io.Writer, tty bool) (int, error) {
	e, err := p.Exec(ctx, ExecSpec{Args: args, Stdin: in, Stdout: out, Stderr: errw, TTY: tty})
	if err != nil {
		return 0, err
	}
	select {
	case <-e.Done():
	case <-ctx.Done():
		_ = e.Signal(syscall.SIGKILL)
		<-e.Done()
		code, _ := e.ExitCode()
		return code, ctx.Err()
	}
	code, _ := e.ExitCode()
	return code, nil
}

// cappedOutput is the output of an ExecSync: its streams share one budget of remain bytes, and
// what does not fit is dropped (the writer is told it was written, so the command goes on).
type CappedOutput struct {
	mu             sync.Mutex
	remain         int
	Stdout, Stderr CappedStream
}

// NewCappedOutput keeps at most limit bytes of what its Stdout and Stderr are
// written, the two together (ExecSync's bound).
func NewCappedOutput(limit int) *CappedOutput {
	o := &CappedOutput{remain: limit}
	o.Stdout.o, o.Stderr.o = o, o
	return o
}

type CappedStream struct {
	o *CappedOutput
	b []byte
}

func (c *CappedStream) Write(p []byte) (int, error) {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	n := min(len(p), c.o.remain)
	c.b = append(c.b, p[:n]...)
	c.o.remain -= n
	return len(p), nil
}

// Bytes is what was kept so far.
func (c *CappedStream) Bytes() []byte {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	return c.b[:len(c.b):len(c.b)]
}

// Processes lists the container's own live processes by pid (pids are those
// of its PID namespace).
func (p *Process) Processes() []ProcessInfo {
	return infos(p.c.ownTasks())
}

// processes is the namespace-wide view ps, pgrep and pidof show.
func (c *container) processes() []ProcessInfo {
	return infos(c.nsTasks())
}

func infos(tasks []*task) []ProcessInfo {
	out := make([]ProcessInfo, 0, len(tasks))
	for _, t := range tasks {
		t.c.pidns.mu.Lock()
		out = append(out, ProcessInfo{Name: t.name, PID: t.pid, PPID: t.ppid, Args: append([]string(nil), t.argv...), UID: t.id.UID, Started: t.started})
		t.c.pidns.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// IdleMemory and IdleCPU are what Stats reports for a container whose only process has run args
// with env for elapsed, waiting all the while (a dormant sleep or pause a runtime does not
// simulate): the program's resident size and its argv and environment (memory.go), and the 1 ms
// of CPU per second of an idle process.
func IdleMemory(args, env []string) uint64 {
	return appletMemory(args) + uint64(argvCost(args, withDefaultEnv(env, "", Identity{})))
}

// IdleCPU: see IdleMemory.
func IdleCPU(elapsed time.Duration) time.Duration { return elapsed / 1000 }

// Stats returns simulated resource figures for the whole container (the same
// for the main process and its execs). After the main process ended, memory
// is 0 and CPU time stops growing.
func (p *Process) Stats() Stats { return p.c.stats() }

func (c *container) stats() Stats {
	own := c.ownTasks()
	c.mu.Lock()
	now := time.Now()
	var mem uint64
	n := 0
	for _, t := range own {
		mem += t.memory()
		n++
	}
	if !c.dead {
		// A mostly idle container: 1ms of CPU per second per process, at least one.
		active := n
		if active == 0 {
			active = 1
		}
		c.cpuTime += now.Sub(c.cpuAt) / 1000 * time.Duration(active)
	}
	c.cpuAt = now
	cpu := c.cpuTime
	dead := c.dead
	if !dead {
		mem += c.spec.Behaviour.MemoryBytes + uint64(max(c.mem.anon.Load(), 0))
	}
	c.mu.Unlock()
	if files, _ := c.fs.Held(""); files > 0 && !dead {
		mem += uint64(files) // the container's own files are in memory (memory.go)
	}
	cpu += c.cpu.Usage() // what its threads held CPUs for (cpu.go)
	var rate uint64
	c.mu.Lock()
	since, at := c.statsCPU, c.statsAt
	if el := now.Sub(at); el > 0 && cpu >= since && !dead {
		rate = uint64(float64(cpu-since) / el.Seconds())
	}
	c.statsCPU, c.statsAt = cpu, now
	c.mu.Unlock()
	return Stats{MemoryBytes: mem, CPUNanos: uint64(cpu), CPUNanoCores: rate, WritableLayerBytes: uint64(c.fs.WritableLayerBytes()), Processes: n}
}

func UnsetEnv(env []string, k string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return out
}
