package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
)

// Simulated is the default Launcher: every container runs a simulated process from
// cri-fake/process — the image's entrypoint/cmd/env/workdir/user from the catalog, overridden by
// the container config, run by busybox-like applets, a sh subset and web servers — with its
// output in the CRI log at log_path, exec and attach sessions, and its own exit code.
//
// Costs are kept to what a container uses: the image content is built once per image and shared;
// a container's file system view is built once (at CreateContainer when that can fail, else when
// the process starts); the process starts StartLatency after StartContainer, so a container
// stopped at once costs no simulation; the log file is created at StartContainer only when its
// directory exists, else at the first output (see Start); no pause process runs unless a
// container shares the pod's PID namespace; the process reports its own exit.
//
// The lock order is Simulated.mu, then simPod.mu; simProcess.mu is never held with either.
type Simulated struct {
	// Logf reports problems that fail nothing (a log file that cannot be written).
	Logf func(format string, args ...any)
	// StartLatency is how long after StartContainer the process starts (see Start); 0 starts
	// it before StartContainer returns. NewSimulated sets DefaultStartLatency.
	StartLatency time.Duration
	// SpecHook, when set, may change each container's process spec just before the process
	// starts (after the runtime wired its stdio, network and PID namespace). Tests use it to
	// inject faults, such as an output writer that panics.
	SpecHook func(containerID string, spec *process.Spec)

	mu      sync.Mutex
	pending []*simProcess // to start, in start order (the starter goroutine runs while any)
	starter bool
	layers  map[string]*process.Layer
	specs   map[string]process.Spec // built at CreateContainer, for StartContainer
	lookups map[lookupKey]error     // the executable lookup's result
	dnsOnce sync.Once
	hostDNS *runtimeapi.DNSConfig
	pods    map[string]*simPod
	nodePID *process.PIDNamespace
}

// DefaultStartLatency is the simulated container start time: shorter than a real runc start
// (tens of milliseconds), so nothing a client does waits noticeably longer than with containerd.
const DefaultStartLatency = 10 * time.Millisecond

// NewSimulated returns the process-simulation launcher.
func NewSimulated() *Simulated {
	return &Simulated{
		StartLatency: DefaultStartLatency,
		layers:       map[string]*process.Layer{},
		specs:        map[string]process.Spec{},
		lookups:      map[lookupKey]error{},
		pods:         map[string]*simPod{},
	}
}

// simPod is what the containers of one sandbox share: the PID namespace (mode POD, with the
// sandbox's pause as pid 1) and, without a real network namespace, the ports its servers listen
// on (container port → the loopback address they really listen on).
type simPod struct {
	mu    sync.Mutex
	pidns *process.PIDNamespace
	pause *process.Process
	ports map[int]string
}

func (l *Simulated) logf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf(format, args...)
	}
}

func (l *Simulated) pod(id string) *simPod {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pods[id]
	if p == nil {
		p = &simPod{}
		l.pods[id] = p
	}
	return p
}

// layer returns the shared content of an image, built on first use.
func (l *Simulated) layer(imageID string, ic process.ImageConfig) (*process.Layer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ly := l.layers[imageID]; ly != nil {
		return ly, nil
	}
	ly, err := process.ImageLayer(ic)
	if err != nil {
		return nil, err
	}
	if imageID != "" {
		l.layers[imageID] = ly
	}
	return ly, nil
}

// spec builds the process spec of a container: the command by containerd's rule, environment,
// identity and the file system view (FromCRI). Its errors are what containerd reports at
// CreateContainer (an unknown user, a missing host path).
func (l *Simulated) spec(ps ProcessSpec) (process.Spec, error) {
	var ic process.ImageConfig
	if c := ps.Image.Config; c != nil {
		ic = process.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Behavior: c.Behavior}
	}
	ly, err := l.layer(ps.Image.ID, ic)
	if err != nil {
		return process.Spec{}, fmt.Errorf("image %s: %w", ps.Image.ID, err)
	}
	ic.Layer = ly
	sbCfg := ps.SandboxConfig
	if sbCfg.GetDnsConfig() == nil && sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		// containerd copies the host's resolv.conf into a pod without DNS config; it is read
		// once here rather than once per container.
		if dns := l.hostDNSConfig(); dns != nil {
			sbCfg = &runtimeapi.PodSandboxConfig{Metadata: sbCfg.GetMetadata(), Hostname: sbCfg.GetHostname(), Linux: sbCfg.GetLinux(), DnsConfig: dns}
		}
	}
	return process.FromCRI(ps.Config, sbCfg, ic, ps.PodIPs)
}

// hostDNSConfig is the node's /etc/resolv.conf as a DNS config (nil when unreadable).
func (l *Simulated) hostDNSConfig() *runtimeapi.DNSConfig {
	l.dnsOnce.Do(func() {
		b, err := os.ReadFile("/etc/resolv.conf")
		if err != nil {
			return
		}
		d := &runtimeapi.DNSConfig{}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
				continue
			}
			switch f[0] {
			case "nameserver":
				d.Servers = append(d.Servers, f[1])
			case "search", "domain":
				d.Searches = f[1:]
			case "options":
				d.Options = append(d.Options, f[1:]...)
			}
		}
		l.hostDNS = d
	})
	return l.hostDNS
}

// quickLookup tells whether building a container's spec can fail: only a user name to look
// up, a host path to find, or a catalog behaviour to parse can. When none is there (ok), the file
// system view is built only when the process really starts, and whether the command exists
// depends only on what key holds (lookups are cached on it).
func quickLookup(ps ProcessSpec) (key lookupKey, ok bool) {
	c := ps.Image.Config
	if c == nil || len(c.Behavior) > 0 || len(ps.Config.GetMounts()) > 0 ||
		ps.Config.GetLinux().GetSecurityContext().GetRunAsUsername() != "" {
		return key, false
	}
	if c.User != "" {
		u, g, _ := strings.Cut(c.User, ":")
		if _, err := strconv.Atoi(u); err != nil {
			return key, false
		}
		if _, err := strconv.Atoi(g); g != "" && err != nil {
			return key, false
		}
	}
	exe, ok := process.Executable(c.Entrypoint, c.Cmd, ps.Config.GetCommand(), ps.Config.GetArgs())
	if !ok {
		return key, false
	}
	key = lookupKey{image: ps.Image.ID, exe: exe, workDir: ps.Config.GetWorkingDir()}
	for _, e := range c.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			key.path = v
		}
	}
	for _, kv := range ps.Config.GetEnvs() {
		if kv.GetKey() == "PATH" {
			key.path = string(kv.GetValue())
		}
	}
	if key.workDir == "" {
		key.workDir = c.WorkingDir
	}
	return key, true
}

// lookupKey is what the result of an executable lookup depends on when quickLookup says so.
type lookupKey struct{ image, exe, path, workDir string }

// Validate builds the container's spec at CreateContainer when that can fail (containerd reports
// an unknown user or a missing host path there) and keeps it for StartContainer.
func (l *Simulated) Validate(ps ProcessSpec) error {
	if _, quick := quickLookup(ps); quick {
		return nil
	}
	spec, err := l.spec(ps)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.specs[ps.ContainerID] = spec
	l.mu.Unlock()
	return nil
}

// ReleaseContainer forgets a container that was created and never started.
func (l *Simulated) ReleaseContainer(id string) {
	l.mu.Lock()
	delete(l.specs, id)
	l.mu.Unlock()
}

// ReleaseSandbox ends the sandbox's pause process and forgets its ports (StopPodSandbox).
func (l *Simulated) ReleaseSandbox(id string) {
	l.mu.Lock()
	p := l.pods[id]
	delete(l.pods, id)
	l.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		pause := p.pause
		p.mu.Unlock()
		if pause != nil {
			pause.Signal(syscall.SIGKILL)
		}
	}
}

// pidNamespace returns the PID namespace a container joins: its own (nil) for mode CONTAINER,
// the node's for NODE (hostPID), the pod's for POD, where the sandbox's /pause is pid 1 as in a
// real pod (containerd's default when the container config names no mode).
func (l *Simulated) pidNamespace(ps ProcessSpec) (*process.PIDNamespace, error) {
	switch ps.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() {
	case runtimeapi.NamespaceMode_CONTAINER:
		return nil, nil
	case runtimeapi.NamespaceMode_NODE:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.nodePID == nil {
			l.nodePID = process.NewPIDNamespace()
		}
		return l.nodePID, nil
	}
	if ps.Config.GetLinux().GetSecurityContext().GetNamespaceOptions() == nil {
		// No namespace options at all (not a kubelet: it always sends them): a PID namespace of
		// the container's own, which saves starting a pause per pod for clients that do not care.
		return nil, nil
	}
	pod := l.pod(ps.SandboxID)
	pod.mu.Lock()
	defer pod.mu.Unlock()
	if pod.pidns == nil {
		ns := process.NewPIDNamespace()
		fs, err := process.NewFS(process.FSConfig{Image: process.BaseLayer("pause"), Hostname: ps.SandboxConfig.GetHostname()})
		if err != nil {
			return nil, err
		}
		pause, err := process.Start(context.Background(), process.Spec{
			Args: []string{"/pause"}, FS: fs, PIDNamespace: ns, Hostname: ps.SandboxConfig.GetHostname(),
			Identity: process.Identity{UID: 65535, GID: 65535},
		})
		if err != nil {
			return nil, fmt.Errorf("start the sandbox's pause process: %w", err)
		}
		pod.pidns, pod.pause = ns, pause
	}
	return pod.pidns, nil
}

// listen is the servers' Listen without a real network namespace: a real socket on an ephemeral
// loopback port, registered under the port the server asked for, so PortForward finds it.
func (p *simPod) listen(network, address string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(port)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, busy := p.ports[n]; busy && n != 0 {
		return nil, &net.OpError{Op: "listen", Net: network, Err: syscall.EADDRINUSE}
	}
	ln, err := net.Listen(network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if p.ports == nil {
		p.ports = map[int]string{}
	}
	p.ports[n] = ln.Addr().String()
	return &podListener{Listener: ln, pod: p, port: n}, nil
}

type podListener struct {
	net.Listener
	pod  *simPod
	port int
	once sync.Once
}

func (l *podListener) Close() error {
	l.once.Do(func() {
		l.pod.mu.Lock()
		if l.pod.ports[l.port] == l.Listener.Addr().String() {
			delete(l.pod.ports, l.port)
		}
		l.pod.mu.Unlock()
	})
	return l.Listener.Close()
}

// DialPort connects to a port of a sandbox: inside its network namespace when it has a real one
// (the servers listen there), else to where the pod's servers registered that port.
func (l *Simulated) DialPort(ctx context.Context, sandboxID, netns string, realNetNS bool, port int32) (net.Conn, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	if realNetNS {
		if netns == "" {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr) // host network: the node's namespace
		}
		return process.DialInNetNS(ctx, netns, "tcp", addr)
	}
	l.mu.Lock()
	p := l.pods[sandboxID]
	l.mu.Unlock()
	var real string
	if p != nil {
		p.mu.Lock()
		real = p.ports[int(port)]
		p.mu.Unlock()
	}
	if real == "" {
		return nil, fmt.Errorf("dial tcp %s: connect: connection refused (nothing listens on port %d in the pod)", addr, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", real)
}

// Start runs the container's process with its stdio wired to the CRI log and attach sessions.
//
// Whether the command can start is decided here (a missing executable fails StartContainer as
// with containerd); the process itself starts StartLatency later — a real runtime takes tens of
// milliseconds to start a container too — or at once when anything needs it first (exec,
// attach, a signal other than TERM/KILL). A container stopped with TERM or KILL before then ends
// as a process killed before its command ran (128+signal) without its simulation being built:
// a node churning through pods pays for no file system views it never uses.
func (l *Simulated) Start(ctx context.Context, ps ProcessSpec) (Process, error) {
	l.mu.Lock()
	spec, built := l.specs[ps.ContainerID]
	delete(l.specs, ps.ContainerID)
	l.mu.Unlock()
	key, quick := quickLookup(ps)
	if !built && !quick {
		// Restored after a cri-fake restart, or a launcher used without Validate.
		var err error
		if spec, err = l.spec(ps); err != nil {
			return nil, err
		}
		built = true
	}
	if built {
		if err := process.Lookup(spec.FS, spec.Args, spec.Env, spec.WorkingDir); err != nil {
			return nil, startError(err)
		}
	} else {
		l.mu.Lock()
		lookErr, known := l.lookups[key]
		l.mu.Unlock()
		if !known {
			var err error
			if spec, err = l.spec(ps); err != nil {
				return nil, err
			}
			built = true
			lookErr = process.Lookup(spec.FS, spec.Args, spec.Env, spec.WorkingDir)
			l.mu.Lock()
			l.lookups[key] = lookErr
			l.mu.Unlock()
		}
		if lookErr != nil {
			return nil, startError(lookErr)
		}
	}

	sp := &simProcess{
		l: l, ps: ps, unstarted: true,
		logs:      lazyLog{path: ps.LogPath, logf: l.logf},
		stdinOnce: ps.Config.GetStdinOnce(),
		ready:     make(chan struct{}),
		done:      make(chan struct{}),
		memLimit:  memoryLimit(ps),
	}
	if built {
		own := spec // a copy of its own, so that spec stays off the heap when not built
		sp.spec = &own
	}
	if ps.LogPath != "" {
		// containerd opens the log file at StartContainer, so a client can open it as soon as
		// the call returns (critest does). The kubelet (and critest) create the log directory
		// before CreateContainer; when nobody did, the directories and the file are made at
		// the first output instead, which keeps creating them off the start path of clients
		// that never read logs (making two directories and a file costs more than the
		// runtime's bookkeeping for a whole pod lifecycle). One open tells which case this is.
		if w, err := process.OpenLogWriter(ps.LogPath); err == nil {
			sp.logs.w = w
		}
	}
	if l.StartLatency <= 0 {
		if err := sp.materialise(); err != nil {
			return nil, startError(err)
		}
		return sp, nil
	}
	l.schedule(sp, time.Now().Add(l.StartLatency))
	return sp, nil
}

// schedule has the starter goroutine start sp at the given time. One goroutine sleeping until
// the next start costs less than a timer per container: on a node churning through pods most
// containers are stopped before their start time and cost nothing more.
//
// Arming a timer (a sleep, time.AfterFunc, a Reset) when none is due earlier wakes a thread of
// the Go scheduler, so schedule arms none while the starter already sleeps (every later start
// is due after the one it waits for), and the starter passes over the processes that were
// stopped or used meanwhile without sleeping until their time: a node churning through pods
// faster than the start latency wakes the starter about once per latency, not once per
// container.
func (l *Simulated) schedule(sp *simProcess, at time.Time) {
	sp.startAt = at
	l.mu.Lock()
	l.pending = append(l.pending, sp)
	run := !l.starter
	l.starter = true
	l.mu.Unlock()
	if run {
		go l.startPending()
	}
}

func (l *Simulated) startPending() {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.starter = false
			l.pending = nil
			l.mu.Unlock()
			return
		}
		next := l.pending[0]
		if next.settled.Load() {
			// Stopped before its start, or started by an exec or attach: nothing to do.
			l.pending[0] = nil
			l.pending = l.pending[1:]
			l.mu.Unlock()
			continue
		}
		if wait := time.Until(next.startAt); wait > 0 {
			l.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		l.pending[0] = nil
		l.pending = l.pending[1:]
		l.mu.Unlock()
		next.materialise() // at once when it was stopped or used meanwhile
	}
}

// startError words a start failure as containerd reports it from StartContainer.
func startError(err error) error {
	var ee *process.ExecError
	if errors.As(err, &ee) {
		// runc's words, wrapped the way containerd wraps them.
		return fmt.Errorf("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: %w: unknown", err)
	}
	return err
}

// run starts the process and arranges for its end to flush the output and close done.
func (s *simProcess) run(spec process.Spec) error {
	p, err := process.Start(context.Background(), spec)
	if err != nil {
		return err
	}
	s.p = p
	go func() {
		<-p.Done()
		s.cio.Close()  // ends attach sessions, flushes their last line
		s.logs.close() // flushes a last line without newline as an F record
		code, _ := p.ExitCode()
		s.exit = Exit{Code: int32(code), At: p.FinishedAt()}
		s.closeDone()
	}()
	return nil
}

// begin starts the process: it builds the spec when Start did not need to, and wires the
// process to the pod (network, PID namespace) and to the log and attach sessions. A panic on
// the way (a defect of cri-fake, met with this container's config) fails this start only.
func (s *simProcess) begin() (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.l.logf("container %s: starting its process crashed on a defect of cri-fake: %v\n%s", s.ps.ContainerID, r, debug.Stack())
			err = fmt.Errorf("cri-fake defect while starting the process: %v", r)
		}
	}()
	l, ps := s.l, s.ps
	var spec process.Spec
	if s.spec != nil {
		spec = *s.spec
	} else {
		var err error
		if spec, err = l.spec(ps); err != nil {
			return err
		}
	}
	hostNetwork := ps.SandboxConfig.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	switch {
	case ps.RealNetNS && ps.NetNS != "" && !hostNetwork:
		spec.NetNS = ps.NetNS
	case ps.RealNetNS:
		// Host network with real namespaces: the servers listen in cri-fake's own
		// namespace, which is the node's.
	default:
		spec.Listen = l.pod(ps.SandboxID).listen
	}
	pidns, err := l.pidNamespace(ps)
	if err != nil {
		return err
	}
	spec.PIDNamespace = pidns
	s.applyMemoryLimit(spec.FS)
	cio := process.NewContainerIO(nil, ps.Config.GetStdin(), ps.Config.GetTty())
	s.cio = cio // before ready is closed, which publishes it
	spec.Stdin = cio.Stdin()
	spec.Stdout = tee{cio.Stdout(), s.logs.stream(process.Stdout)}
	spec.Stderr = tee{cio.Stderr(), s.logs.stream(process.Stderr)}
	// A defect of the simulation ends only the process it hit (exit 139), reported here.
	spec.Logf = l.Logf
	if l.SpecHook != nil {
		l.SpecHook(ps.ContainerID, &spec)
	}
	return s.run(spec)
}

// materialise starts the process now if it has not started yet, and waits until it has (or
// failed to, or was killed before it could).
func (s *simProcess) materialise() error {
	s.mu.Lock()
	unstarted := s.unstarted
	s.unstarted = false
	s.settled.Store(true)
	s.mu.Unlock()
	if !unstarted {
		<-s.ready
		return s.startErr
	}
	if err := s.begin(); err != nil {
		s.end(Exit{Code: 128, Reason: "StartError", Message: startError(err).Error(), At: time.Now()})
		s.startErr = err
		close(s.ready)
		return err
	}
	close(s.ready)
	return nil
}

// end records the exit of a process that never ran.
func (s *simProcess) end(e Exit) {
	if s.cio != nil {
		s.cio.Close()
	}
	s.logs.close()
	s.exit = e
	s.closeDone()
}

// tee writes the process's output to its attach sessions and to the log.
type tee struct{ a, b io.Writer }

func (t tee) Write(p []byte) (int, error) {
	t.a.Write(p)
	t.b.Write(p)
	return len(p), nil
}

// lazyLog is the container's CRI log, opened when the process first writes or when
// ReopenContainerLog asks for it.
type lazyLog struct {
	path string
	logf func(string, ...any)

	mu      sync.Mutex
	w       *process.LogWriter
	streams map[string]io.WriteCloser
	failed  bool
	closed  bool
}

func (l *lazyLog) openLocked() *process.LogWriter {
	if l.w == nil && !l.failed && !l.closed && l.path != "" {
		w, err := process.NewLogWriter(l.path)
		if err != nil {
			l.failed = true // like a full disk: the output is lost, the process goes on
			l.logf("container log %s: %v", l.path, err)
			return nil
		}
		l.w = w
	}
	return l.w
}

func (l *lazyLog) stream(name string) io.Writer { return logStream{l, name} }

type logStream struct {
	l    *lazyLog
	name string
}

func (s logStream) Write(p []byte) (int, error) {
	l := s.l
	l.mu.Lock()
	w := l.openLocked()
	var st io.WriteCloser
	if w != nil {
		if l.streams == nil {
			l.streams = map[string]io.WriteCloser{}
		}
		if st = l.streams[s.name]; st == nil {
			st = w.Stream(s.name)
			l.streams[s.name] = st
		}
	}
	l.mu.Unlock()
	if st != nil {
		st.Write(p)
	}
	return len(p), nil
}

// reopen starts a new file at the log path (ReopenContainerLog after the kubelet's rotation),
// creating it if the process has not written yet.
func (l *lazyLog) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return nil
	}
	if l.w == nil {
		l.failed = false
		if l.openLocked() == nil {
			return fmt.Errorf("open %s", l.path)
		}
		return nil
	}
	return l.w.Reopen()
}

func (l *lazyLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.streams {
		s.Close()
	}
	if l.w != nil {
		l.w.Close()
	}
	l.closed = true
}

// simProcess adapts a process.Process to the runtime's Process and its extensions.
type simProcess struct {
	l         *Simulated
	ps        ProcessSpec
	spec      *process.Spec        // built by Start, or nil: begin builds it
	cio       *process.ContainerIO // made when the process starts
	logs      lazyLog
	stdinOnce bool

	mu        sync.Mutex
	unstarted bool        // begin is still to be called (false once started or abandoned)
	startAt   time.Time   // when the starter starts it
	settled   atomic.Bool // unstarted was taken (started or abandoned): the starter skips it

	ready    chan struct{} // p or startErr is set (p stays nil for a process killed before it ran)
	p        *process.Process
	startErr error
	done     chan struct{} // the process ended and its output is flushed; exit is set
	exit     Exit
	onExit   func() // NotifyExit's callback, set under mu; called once after done closes
	ended    bool   // done is closed (under mu)

	memLimit int64       // memory limit bounding the container's in-memory files (under mu)
	fs       *process.FS // the started process's file system (under mu; see UpdateResources)
}

// NotifyExit calls f once the process has ended (at once if it already has).
func (s *simProcess) NotifyExit(f func()) {
	s.mu.Lock()
	if !s.ended {
		s.onExit = f
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

// closeDone marks the end (exit must be set) and runs the exit callback.
func (s *simProcess) closeDone() {
	close(s.done)
	s.mu.Lock()
	s.ended = true
	f := s.onExit
	s.onExit = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *simProcess) Signal(sig syscall.Signal) error {
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		s.mu.Lock()
		if s.unstarted {
			// Stopped before it started: its command never ran; it ends as a process killed
			// by the signal.
			s.unstarted = false
			s.settled.Store(true)
			s.mu.Unlock()
			s.end(Exit{Code: 128 + int32(sig), At: time.Now()})
			close(s.ready)
			return nil
		}
		s.mu.Unlock()
	}
	s.materialise()
	if s.p == nil {
		return nil
	}
	if err := s.p.Signal(sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Done is closed once the process has ended and its output is flushed to the log.
func (s *simProcess) Done() <-chan struct{} { return s.done }

func (s *simProcess) Exit() Exit { return s.exit }

func (s *simProcess) ReopenLog() error { return s.logs.reopen() }

// crashedExec turns a panic met while an exec was being set up in the caller's goroutine (the
// command itself runs in the process's own goroutines, which end it with 139 themselves) into
// the exec's end with 139, as a command killed by SIGSEGV, so the RPC answers and cri-fake
// keeps serving.
func (s *simProcess) crashedExec(cmd []string, code *int) {
	if r := recover(); r != nil {
		s.l.logf("container %s: exec %q crashed on a defect of cri-fake and ends with exit code 139: %v\n%s", s.ps.ContainerID, cmd, r, debug.Stack())
		*code = 128 + int(syscall.SIGSEGV)
	}
}

// ExecSync runs cmd in the container; ctx carries ExecSync's timeout. Its output is bounded by
// process.MaxExecSyncOutput (containerd's cap).
func (s *simProcess) ExecSync(ctx context.Context, cmd []string) (res ExecResult, err error) {
	var crashed int
	defer func() {
		if crashed != 0 {
			res, err = ExecResult{ExitCode: int32(crashed)}, nil
		}
	}()
	defer s.crashedExec(cmd, &crashed)
	s.materialise()
	if s.p == nil {
		return ExecResult{}, process.ErrNotRunning
	}
	stdout, stderr, code, err := s.p.ExecSync(ctx, cmd, 0)
	if err != nil {
		return ExecResult{}, err
	}
	return ExecResult{Stdout: stdout, Stderr: stderr, ExitCode: int32(code)}, nil
}

// Usage is the process's own resource figures (ContainerStats).
func (s *simProcess) Usage() Usage {
	s.materialise() // at most the start latency early
	if s.p == nil {
		return Usage{}
	}
	st := s.p.Stats()
	return Usage{MemoryBytes: st.MemoryBytes, CPUNanos: st.CPUNanos, WritableLayerBytes: st.WritableLayerBytes}
}

// ExecStream runs an interactive command (the streaming server's Exec).
func (s *simProcess) ExecStream(ctx context.Context, cmd []string, in io.Reader, out, errw io.Writer, tty bool, resize <-chan TerminalSize) (code int, err error) {
	var crashed int
	defer func() {
		if crashed != 0 {
			code, err = crashed, nil
		}
	}()
	defer s.crashedExec(cmd, &crashed)
	s.materialise()
	if s.p == nil {
		return 0, process.ErrNotRunning
	}
	e, err := s.p.Exec(ctx, process.ExecSpec{Args: cmd, Stdin: in, Stdout: out, Stderr: errw, TTY: tty})
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
func (s *simProcess) Attach(ctx context.Context, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	s.materialise()
	if s.p == nil {
		return process.ErrNotRunning
	}
	go forwardResize(resize, s.done, s.p.Resize)
	return s.cio.Attach(ctx, in, out, errw, s.stdinOnce)
}

func forwardResize(resize <-chan TerminalSize, done <-chan struct{}, set func(w, h uint16)) {
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
