package process

import (
	"context"
	"net"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/kernel/ipcns"
	"github.com/plugsim/plugsim/cri-fake/process/seccomp"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime imports only this package: the process itself (package
// kernel), its file system view (vfs) and what it wires around a process (the
// CRI log file, attach: containerio) are named here too.
type (
	// LogWriter writes a container's CRI log file (containerio.LogWriter).
	LogWriter = containerio.LogWriter
	// ContainerIO is a container's stdio: log plus attach fan-out (containerio.ContainerIO).
	ContainerIO = containerio.ContainerIO
)

// The CRI log's stream names.
const (
	Stdout = containerio.Stdout
	Stderr = containerio.Stderr
)

// NewLogWriter creates the log file and its directory (containerio.NewLogWriter).
func NewLogWriter(path string) (*LogWriter, error) { return containerio.NewLogWriter(path) }

// OpenLogWriter creates the log file in a directory that exists (containerio.OpenLogWriter).
func OpenLogWriter(path string) (*LogWriter, error) { return containerio.OpenLogWriter(path) }

// NewContainerIO wires a process's stdio to log and attach sessions (containerio.NewContainerIO).
func NewContainerIO(log *LogWriter, stdin, tty bool) *ContainerIO {
	return containerio.NewContainerIO(log, stdin, tty)
}

// The container's file system view (package vfs).
type (
	FS        = vfs.FS
	FSConfig  = vfs.FSConfig
	Mount     = vfs.Mount
	User      = vfs.User
	Group     = vfs.Group
	DNSConfig = vfs.DNSConfig
	Owner     = vfs.Owner
	Layer     = vfs.Layer
	// TreeBudget bounds the private copies of host trees (rprivate mounts) a runtime's views hold.
	TreeBudget = vfs.TreeBudget
)

// DefaultMemoryLimit bounds a container's own files when its config sets none.
const DefaultMemoryLimit = vfs.DefaultMemoryLimit

// NewTreeBudget allows n private copies of host trees at a time (vfs.NewTreeBudget).
func NewTreeBudget(n int) *TreeBudget { return vfs.NewTreeBudget(n) }

// NewLayer returns an empty image layer (vfs.NewLayer).
func NewLayer() *Layer { return vfs.NewLayer() }

// NewFS builds a container's file system view (vfs.NewFS) over cfg.Image, or
// over the busybox base image when cfg.Image is nil.
func NewFS(cfg FSConfig) (*FS, error) {
	if cfg.Image == nil {
		cfg.Image = BaseLayer("busybox")
	}
	return vfs.NewFS(cfg)
}

// The simulated process (package kernel).
type (
	Spec      = kernel.Spec
	Process   = kernel.Process
	ExecSpec  = kernel.ExecSpec
	ExecError = kernel.ExecError
	// SeccompRefusal is a seccomp profile runc would refuse to load (Spec.Refused).
	SeccompRefusal = seccomp.CompileError
	Identity       = kernel.Identity
	Behaviour      = kernel.Behaviour
	ExitBehaviour  = kernel.ExitBehaviour
	PIDNamespace   = kernel.PIDNamespace
	IPCNamespace   = ipcns.Namespace
	ProcessInfo    = kernel.ProcessInfo
	Stats          = kernel.Stats
	// CPUScheduler is the node's CPUs, which the containers' processes share (kernel.CPUScheduler).
	CPUScheduler = kernel.CPUScheduler
)

// Bounds of a container's processes and of ExecSync's output.
const (
	DefaultPidsLimit  = kernel.DefaultPidsLimit
	MaxPidsLimit      = kernel.MaxPidsLimit
	MaxExecSyncOutput = kernel.MaxExecSyncOutput
)

// The errors of Start, Exec and ExecSync.
var (
	ErrNotFound    = kernel.ErrNotFound
	ErrNotRunning  = kernel.ErrNotRunning
	ErrExecTimeout = kernel.ErrExecTimeout
)

// NewPIDNamespace is a PID namespace to share between containers (kernel.NewPIDNamespace).
func NewPIDNamespace() *PIDNamespace { return kernel.NewPIDNamespace() }

// NewIPCNamespace returns an empty System V IPC namespace (a pod's: ipcns.New).
func NewIPCNamespace() *IPCNamespace { return ipcns.New() }

// NewNodeIPCNamespace returns the node's IPC namespace for hostIPC containers, listing the
// node's own objects from sysvipcDir (/proc/sysvipc) besides the simulation's.
func NewNodeIPCNamespace(sysvipcDir string) *IPCNamespace {
	return ipcns.NewNode(sysvipcDir)
}

// NewCPUScheduler returns the CPUs of a node of n (≤ 0: kernel.DefaultCPUs) for Spec.CPU.
func NewCPUScheduler(n int) *CPUScheduler { return kernel.NewCPUScheduler(n) }

// CPULimit is the CPU quota and period a container's resources ask for (kernel.CPULimit).
func CPULimit(r *runtimeapi.LinuxContainerResources) (quota, period time.Duration) {
	return kernel.CPULimit(r)
}

// PidsLimit is the pids limit a container's resources ask for (kernel.PidsLimit).
func PidsLimit(r *runtimeapi.LinuxContainerResources) int { return kernel.PidsLimit(r) }

// CapabilityNames are the Linux capabilities by number (kernel.CapabilityNames).
func CapabilityNames() []string { return kernel.CapabilityNames() }

// DefaultCapabilities is containerd's default capability set (kernel.DefaultCapabilities).
func DefaultCapabilities() []string { return kernel.DefaultCapabilities() }

// EffectiveCapabilities applies add and drop to the default set (kernel.EffectiveCapabilities).
func EffectiveCapabilities(add, drop []string, privileged bool) []string {
	return kernel.EffectiveCapabilities(add, drop, privileged)
}

// Lookup reports whether args[0] can be run in fsys (kernel.Lookup).
func Lookup(fsys *FS, args, env []string, workingDir string) error {
	return kernel.Lookup(fsys, args, env, workingDir)
}

// ListenInNetNS listens inside the network namespace at nsPath (kernel.ListenInNetNS).
func ListenInNetNS(nsPath, network, address string) (net.Listener, error) {
	return kernel.ListenInNetNS(nsPath, network, address)
}

// DialInNetNS connects from inside the network namespace at nsPath (kernel.DialInNetNS).
func DialInNetNS(ctx context.Context, nsPath, network, address string) (net.Conn, error) {
	return kernel.DialInNetNS(ctx, nsPath, network, address)
}
