// Package runtime is cri-fake's RuntimeService: one file per RPC family, in containerd's
// internal/cri/server layout. A handler validates its request, looks objects up in the stores,
// changes state through the stores' guarded transitions, and answers; gRPC codes are decided here
// from the typed errors underneath.
//
// What runs in a started container is its task (cri-fake/task): the Launcher (launcher.go)
// starts it, the container's store record holds it, and the handlers drive it — Kill from
// StopContainer, ExecSync, Exec and Attach from the streaming calls, Usage from the stats, Update
// and ReopenLog. The default launcher, Simulated (simulated*.go), backs each task with a
// simulated process of cri-fake/process.
package runtime

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/store"
)

// Options configure the runtime service.
type Options struct {
	// RootDir holds the netns files and the log directories of sandboxes that bring none.
	RootDir string
	// RuntimeHandlers are the accepted runtime handler names; "" (the default handler) is always
	// accepted. Empty means {"runc"}.
	RuntimeHandlers []string
	// CgroupDriver is "cgroupfs" (default) or "systemd".
	CgroupDriver string
	// Images resolves container images (required).
	Images *images.Service
	// Network attaches sandboxes; nil means the built-in allocator.
	Network network.Plugin
	// NetNS creates the sandboxes' namespace paths.
	NetNS network.NetNSManager
	// Launcher starts the containers' tasks; nil means the process simulation (NewSimulated).
	Launcher Launcher
	// Streaming serves Exec, Attach and PortForward; nil answers them Unimplemented.
	Streaming Streaming
	// Persister saves state changes (nil: memory only).
	Persister Persister
	// Info is added to verbose Status under "config" (the flags cri-fake runs with).
	Info map[string]any
	// Logf reports problems that do not fail a call (a state file that could not be written).
	Logf func(format string, args ...any)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Persister saves the runtime's state (see store.FileState).
type Persister interface {
	SaveSandbox(*store.Sandbox) error
	DeleteSandbox(id string) error
	SaveContainer(*store.Container) error
	DeleteContainer(id string) error
}

// Service implements runtime.v1 RuntimeService.
type Service struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	opts       Options
	sandboxes  *store.SandboxStore
	containers *store.ContainerStore
	images     *images.Service
	network    network.Plugin
	launcher   Launcher
	handlers   map[string]bool
	events     *broker
	now        func() time.Time
	version    string
	closing    atomic.Bool
	// exits is held (shared) by every recordExit while it records and saves an exit, and taken
	// by Close, so that no exit is written to the state dir after Close returns.
	exits sync.RWMutex
}

// New returns a runtime service with empty stores.
func New(opts Options) (*Service, error) {
	if opts.Images == nil {
		return nil, errors.New("runtime: Options.Images is required")
	}
	switch opts.CgroupDriver {
	case "":
		opts.CgroupDriver = "cgroupfs"
	case "cgroupfs", "systemd":
	default:
		return nil, fmt.Errorf("cgroup driver %q: want cgroupfs or systemd", opts.CgroupDriver)
	}
	if len(opts.RuntimeHandlers) == 0 {
		opts.RuntimeHandlers = []string{"runc"}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Network == nil {
		opts.Network = network.NewInternal()
	}
	if opts.Launcher == nil {
		sim := NewSimulated()
		sim.Logf = opts.Logf
		opts.Launcher = sim
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RootDir == "" {
		return nil, errors.New("runtime: Options.RootDir is required")
	}
	if opts.NetNS.Dir == "" {
		opts.NetNS.Dir = filepath.Join(opts.RootDir, "netns")
	}
	s := &Service{
		opts:       opts,
		sandboxes:  store.NewSandboxStore(),
		containers: store.NewContainerStore(),
		images:     opts.Images,
		network:    opts.Network,
		launcher:   opts.Launcher,
		handlers:   map[string]bool{"": true},
		events:     newBroker(),
		now:        opts.Now,
		version:    moduleVersion(),
	}
	for _, h := range opts.RuntimeHandlers {
		s.handlers[h] = true
	}
	return s, nil
}

// Sandboxes and Containers expose the stores (state loading, tests, benchmarks).
func (s *Service) Sandboxes() *store.SandboxStore    { return s.sandboxes }
func (s *Service) Containers() *store.ContainerStore { return s.containers }

// Close ends every running container's process without recording the exits, so the state a
// restart reloads still says RUNNING (as a containerd restart finds its shims), and ends the
// event streams.
func (s *Service) Close() {
	s.closing.Store(true)
	// Wait for the exits being recorded now; those that come after see closing and return.
	s.exits.Lock()
	s.exits.Unlock()
	for _, c := range s.containers.List() {
		if t := c.Task(); t != nil {
			t.Kill(syscall.SIGKILL)
		}
	}
	for _, sb := range s.sandboxes.List() {
		s.releaseSandbox(sb.ID)
	}
	if c, ok := s.launcher.(interface{ Close() }); ok {
		c.Close() // a launcher of real processes waits for them to be cleaned up
	}
	s.events.close()
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "v0.0.0-dev"
}

// newID returns a 64-hex-digit ID like containerd's.
func newID() string {
	var b [32]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rand.Uint64())
	}
	return hex.EncodeToString(b[:])
}

// storeError turns a store error into a gRPC status.
func storeError(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s not found", what)
	case errors.Is(err, store.ErrAmbiguous):
		return status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	case errors.Is(err, store.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrInvalidState):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Errorf(codes.Unknown, "%s: %v", what, err)
}

func (s *Service) persistSandbox(sb *store.Sandbox) {
	if s.opts.Persister != nil {
		if err := s.opts.Persister.SaveSandbox(sb); err != nil {
			s.opts.Logf("save sandbox %s: %v", sb.ID, err)
		}
	}
}

func (s *Service) persistContainer(c *store.Container) {
	if s.opts.Persister != nil {
		if err := c.Save(s.opts.Persister.SaveContainer); err != nil {
			s.opts.Logf("save container %s: %v", c.ID, err)
		}
	}
}

func (s *Service) unpersistSandbox(id string) {
	if s.opts.Persister != nil {
		if err := s.opts.Persister.DeleteSandbox(id); err != nil {
			s.opts.Logf("delete sandbox %s state: %v", id, err)
		}
	}
}

// forgetContainer deletes the record of a container being removed; no later save of it (an exit
// recorded at the same moment) writes it again.
func (s *Service) forgetContainer(c *store.Container) {
	if s.opts.Persister != nil {
		if err := c.Forget(s.opts.Persister.DeleteContainer); err != nil {
			s.opts.Logf("delete container %s state: %v", c.ID, err)
		}
	}
}

func (s *Service) unpersistContainer(id string) {
	if s.opts.Persister != nil {
		if err := s.opts.Persister.DeleteContainer(id); err != nil {
			s.opts.Logf("delete container %s state: %v", id, err)
		}
	}
}

// createLogFile creates the container's log file (and its directory) at start, as containerd's
// logger does, so `kubectl logs` finds a file even for a silent container.
func createLogFile(path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create container log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("create container log file: %w", err)
	}
	return f.Close()
}

// realNetNS tells whether sandboxes get real network namespaces (--netns=real).
func (s *Service) realNetNS() bool { return s.opts.NetNS.Mode == network.NetNSReal }

// releaseContainer tells the launcher a container is gone.
func (s *Service) releaseContainer(id string) { s.launcher.ReleaseContainer(id) }

// releaseSandbox tells the launcher a sandbox has stopped.
func (s *Service) releaseSandbox(id string) { s.launcher.ReleaseSandbox(id) }
