package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	"github.com/plugsim/plugsim/cri-fake/runtime/alarm"
	"github.com/plugsim/plugsim/cri-fake/runtime/delayedstart"
	"github.com/plugsim/plugsim/cri-fake/runtime/execlookup"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// Simulated is the default Launcher: every container's task (simTask) runs a simulated process
// from cri-fake/process — the image's entrypoint/cmd/env/workdir/user from the catalog,
// overridden by the container config, run by busybox-like applets, a sh subset and web servers —
// with its output in the CRI log at log_path, exec and attach sessions, and its own exit code.
//
// The image content is built once per image and shared; a container's process spec (with its
// file system view) is built once, at CreateContainer when that can fail (Validate keeps it for
// Start), else when the process starts. What a container costs beyond that is kept down by three
// types, each saying what it buys: execlookup.Cache, delayedstart.Queue and
// containerio.LazyLog.
//
// The lock order is Simulated.mu, then simPod.mu; simTask.mu and the three types' locks are
// never held with either.
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

	starts  delayedstart.Queue[*simTask]
	ends    alarm.Set[*simTask] // the ends of dormant finite sleeps (simulated_dormant.go)
	lookups execlookup.Cache

	mu         sync.Mutex
	layers     map[string]*process.Layer
	specs      map[string]process.Spec // built at CreateContainer, for StartContainer
	dnsOnce    sync.Once
	hostDNS    *runtimeapi.DNSConfig
	pods       map[string]*simPod
	nodePID    *process.PIDNamespace
	nodeIPC    *process.IPCNamespace  // hostIPC's (simulated_ipc.go)
	mounts     map[string]*process.FS // views holding kernel mounts, by container (simulated_mounts.go)
	trees      *process.TreeBudget    // private copies of host trees for rprivate mounts
	treesShort atomic.Bool            // the budget ran out once (logged once)
	cpus       *process.CPUScheduler  // the node's CPUs, shared fairly by every container's processes
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
		pods:         map[string]*simPod{},
		trees:        process.NewTreeBudget(treeBudget()),
		cpus:         process.NewCPUScheduler(0),
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
	ipcns process.IPCNamespace // IPC mode POD (simulated_ipc.go)
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

// processSpec builds the process spec of a container: the command by containerd's rule,
// environment, identity and the file system view (FromCRI). Its errors are what containerd
// reports at CreateContainer (an unknown user, a missing host path).
func (l *Simulated) processSpec(ts task.Spec) (process.Spec, error) {
	var ic process.ImageConfig
	if c := ts.Image.Config; c != nil {
		ic = process.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Behavior: c.Behavior}
	}
	ly, err := l.layer(ts.Image.ID, ic)
	if err != nil {
		return process.Spec{}, fmt.Errorf("image %s: %w", ts.Image.ID, err)
	}
	ic.Layer = ly
	for ref, vol := range ts.ImageVolumes {
		var vc process.ImageConfig
		if c := vol.Config; c != nil {
			vc = process.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Behavior: c.Behavior}
		}
		vl, err := l.layer(vol.ID, vc)
		if err != nil {
			return process.Spec{}, fmt.Errorf("image volume %s: %w", vol.ID, err)
		}
		if ic.Volumes == nil {
			ic.Volumes = map[string]*process.Layer{}
		}
		ic.Volumes[ref] = vl
	}
	sbCfg := ts.SandboxConfig
	if sbCfg.GetDnsConfig() == nil && sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		// containerd copies the host's resolv.conf into a pod without DNS config; it is read
		// once here rather than once per container.
		if dns := l.hostDNSConfig(); dns != nil {
			sbCfg = &runtimeapi.PodSandboxConfig{Metadata: sbCfg.GetMetadata(), Hostname: sbCfg.GetHostname(), Linux: sbCfg.GetLinux(), DnsConfig: dns}
		}
	}
	spec, err := process.FromCRI(ts.Config, sbCfg, ic, ts.PodIPs)
	if err == nil {
		l.copyPrivateMounts(ts.ContainerID, spec.FS)
		l.holdMounts(ts.ContainerID, spec.FS)
	}
	return spec, err
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

// Validate builds the container's process spec at CreateContainer when that can fail
// (containerd reports an unknown user or a missing host path there) and keeps it for Start.
func (l *Simulated) Validate(ts task.Spec) error {
	if _, quick := execlookup.Quick(ts); quick {
		return nil
	}
	spec, err := l.processSpec(ts)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.specs[ts.ContainerID] = spec
	l.mu.Unlock()
	return nil
}

// ReleaseContainer forgets a container that was created and never started, and gives back the
// kernel mounts of a removed one.
func (l *Simulated) ReleaseContainer(id string) {
	l.mu.Lock()
	delete(l.specs, id)
	l.mu.Unlock()
	l.releaseMounts(id)
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
func (l *Simulated) pidNamespace(ts task.Spec) (*process.PIDNamespace, error) {
	switch ts.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() {
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
	if ts.Config.GetLinux().GetSecurityContext().GetNamespaceOptions() == nil {
		// No namespace options at all (not a kubelet: it always sends them): a PID namespace of
		// the container's own, which saves starting a pause per pod for clients that do not care.
		return nil, nil
	}
	pod := l.pod(ts.SandboxID)
	pod.mu.Lock()
	defer pod.mu.Unlock()
	if pod.pidns == nil {
		ns := process.NewPIDNamespace()
		fs, err := process.NewFS(process.FSConfig{Image: process.BaseLayer("pause"), Hostname: ts.SandboxConfig.GetHostname()})
		if err != nil {
			return nil, err
		}
		pause, err := process.Start(context.Background(), process.Spec{
			Args: []string{"/pause"}, FS: fs, PIDNamespace: ns, Hostname: ts.SandboxConfig.GetHostname(),
			Identity: process.Identity{UID: 65535, GID: 65535}, CPU: l.cpus,
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

// Start starts the container's task: whether its command can start is decided here (a missing
// executable fails StartContainer as with containerd); its process starts StartLatency later — a
// real runtime takes tens of milliseconds to start a container too — or at once when anything
// needs it first (exec, attach, stats, a signal other than TERM/KILL; see simTask.Kill).
func (l *Simulated) Start(ctx context.Context, ts task.Spec) (task.Task, error) {
	procSpec, exe, err := l.startable(ts)
	if err != nil {
		return nil, err
	}
	// The task keeps the config packed (task.PackedConfig) and begin unpacks it again: a
	// container that waits (dormant) or only runs does not hold its tree twice over.
	t := &simTask{
		sim: l, spec: keep(ts), procSpec: procSpec, unstarted: true,
		logs: containerio.LazyLog{Path: ts.LogPath, Logf: l.logf},
		res:  resources(ts),
	}
	t.doze.how, t.doze.may = l.dormancy(ts, procSpec, exe)
	t.logs.OpenIfDirExists()
	if l.StartLatency <= 0 {
		if err := t.materialise(); err != nil {
			return nil, startError(err)
		}
		return t, nil
	}
	l.starts.Schedule(t, time.Now().Add(l.StartLatency))
	return t, nil
}

// startable tells whether the container's command can start, and returns its process spec when
// telling needed it built (nil: the task builds it when its process starts) and what the
// command resolves to.
func (l *Simulated) startable(ts task.Spec) (*process.Spec, vfs.Executable, error) {
	var exe vfs.Executable
	l.mu.Lock()
	spec, built := l.specs[ts.ContainerID]
	delete(l.specs, ts.ContainerID)
	l.mu.Unlock()
	key, quick := execlookup.Quick(ts)
	if !built && !quick {
		// Restored after a cri-fake restart, or a launcher used without Validate.
		var err error
		if spec, err = l.processSpec(ts); err != nil {
			return nil, vfs.Executable{}, err
		}
		built = true
	}
	if built {
		if spec.Refused != nil {
			return nil, vfs.Executable{}, startError(spec.Refused)
		}
		var err error
		if exe, err = process.LookupExecutable(spec.FS, spec.Args, spec.Env, spec.WorkingDir); err != nil {
			return nil, vfs.Executable{}, startError(err)
		}
	} else {
		look, known := l.lookups.Get(key)
		if !known {
			var err error
			if spec, err = l.processSpec(ts); err != nil {
				return nil, vfs.Executable{}, err
			}
			built = true
			look.Exe, look.Err = process.LookupExecutable(spec.FS, spec.Args, spec.Env, spec.WorkingDir)
			l.lookups.Put(key, look)
		}
		if look.Err != nil {
			return nil, vfs.Executable{}, startError(look.Err)
		}
		exe = look.Exe
	}
	if !built {
		return nil, exe, nil
	}
	own := spec // a copy of its own, so that spec stays off the heap when not built
	return &own, exe, nil
}

// startError words a start failure as containerd reports it from StartContainer.
func startError(err error) error {
	const runcCreateFailed = "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
	var ee *process.ExecError
	if errors.As(err, &ee) {
		// runc's words, wrapped the way containerd wraps them.
		return fmt.Errorf(runcCreateFailed+"unable to start container process: error during container init: %w: unknown", err)
	}
	var refused *process.SeccompRefusal
	if errors.As(err, &refused) {
		// runc refuses the profile while it builds the container's config, before init.
		return fmt.Errorf(runcCreateFailed+"%w: unknown", err)
	}
	return err
}
