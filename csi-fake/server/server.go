// Package server runs csi-fake in-process: the CSI driver on its unix socket(s), the kubelet plugin
// registration socket, the trace recorder, the fault rules and the admin socket. The csi-fake
// command is a thin flag parser over Start; the harness and tests call Start directly, so several
// servers can run in one process (there is no package-level state).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/plugsim/plugsim/csi-fake/driver"
	"github.com/plugsim/plugsim/csi-fake/state"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/fixtures"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
	"github.com/plugsim/plugsim/internal/fakeserver"
)

// DefaultPluginRegistryDir is where the kubelet's plugin watcher looks for registration sockets.
const DefaultPluginRegistryDir = "/var/lib/kubelet/plugins_registry"

// Options configure a server. The zero value serves every service on a fresh socket in a temp
// directory, with state in memory, attach required and fake mounts.
type Options struct {
	// Endpoint is the CSI socket (unix:///path.sock); empty means a fresh socket in a temp dir.
	Endpoint string
	// ControllerEndpoint, when set, serves Identity and the controller services on a second
	// socket (csi-sanity --csi.controllerendpoint); Endpoint still serves everything.
	ControllerEndpoint string

	Mode       driver.Mode // all (default), controller or node
	DriverName string      // default csi.plugsim.dev
	NodeID     string      // default the host name
	// StateDir persists the state (state.json) and holds the volumes' data; empty means state in
	// memory and data in a temp dir removed by Close.
	StateDir string
	// DataDir holds the volumes' and snapshots' data (volumes/, snapshots/) when it is not to be
	// StateDir (the default, or a temp dir with state in memory). Several processes may share one,
	// each with its own StateDir: a cluster's node plugins use the controller's, as nodes reach
	// network-attached storage (see NoNodeTopology). Every access goes through an os.Root of it.
	DataDir           string
	Capacity          int64 // bytes; 0 means 1 TiB
	MaxVolumesPerNode int64
	Topology          map[string]string
	// NoNodeTopology leaves topology.plugsim.dev/node out of the node's segment
	// (driver.Config.NoNodeTopology; --node-topology=false).
	NoNodeTopology bool
	// Fixtures are the volumes and snapshots csi-fake holds when it starts (preloaded before it
	// serves, through the RPCs' checks); nil means FixturesFile's csi section, or none. With a
	// StateDir they seed it: they are applied only when it has no state file yet.
	Fixtures     *fixtures.CSI
	FixturesFile string
	// NoAttach drops PUBLISH_UNPUBLISH_VOLUME (--attach-required=false).
	NoAttach      bool
	EphemeralOnly bool
	Mount         driver.MountMode // fake (default) or bind
	KnownNodes    []string

	// Register serves the kubelet registration API on
	// <PluginRegistryDir>/<DriverName>-reg.sock.
	Register          bool
	PluginRegistryDir string // default DefaultPluginRegistryDir
	// KubeletRegistrationPath is the CSI socket path as the kubelet sees it (GetInfo's endpoint);
	// empty means Endpoint's path.
	KubeletRegistrationPath string

	// Recorder receives the trace; nil means a new one of TraceCapacity events (0: the default)
	// appending to TraceFile, if set. A given Recorder is used as it is: TraceFile and
	// TraceCapacity then do not apply (as in cri-fake).
	Recorder      *trace.Recorder
	TraceFile     string
	TraceCapacity int
	// Faults are the fault rules; nil means a new set (loaded from FaultsFile, if set).
	Faults     *faults.Set
	FaultsFile string
	// FaultSeed seeds the random choices of probabilistic rules; 0 means the faults file's seed,
	// else a fresh random one. The seed is logged at start, reported by Server.FaultSeed, and
	// recorded in the trace event of every call a rule faulted (attrs.faultSeed): start again with
	// it and the same calls to repeat a run. A given Faults set keeps its own seed.
	FaultSeed uint64
	// AdminSocket, when set, serves the admin HTTP API (trace and faults) there.
	AdminSocket string
	// SocketMode is the mode of the CSI sockets (0: 0660); AdminSocketMode that of the admin
	// socket (0: 0600). SocketGroup (a group name or number) owns them; empty leaves the
	// process's group. The registration socket stays 0600, as node-driver-registrar's.
	SocketMode      os.FileMode
	AdminSocketMode os.FileMode
	SocketGroup     string

	// Log receives the server's messages; nil discards them.
	Log *slog.Logger
	// LogCalls logs every call with its request, secrets stripped by csi-lib-utils'
	// protosanitizer (the way the kubernetes-csi sidecars log).
	LogCalls bool
}

// Server is a running csi-fake.
type Server struct {
	opts      Options
	log       *slog.Logger
	drv       *driver.Driver
	serving   *fakeserver.Scaffold // trace, faults, gRPC servers, admin API
	endpoints []string
	regEP     string
	tmpDirs   []string
	closeOnce sync.Once
	closeErr  error
}

// Start validates the options, opens the state, listens and serves. Close stops everything.
func Start(opts Options) (_ *Server, retErr error) {
	s := &Server{opts: opts}
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.log = log
	if opts.DriverName == "" {
		opts.DriverName = driver.DefaultDriverName
	}
	if opts.NodeID == "" && opts.Mode != driver.ModeController {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("no node ID given and no host name: %w", err)
		}
		opts.NodeID = h
	}
	if opts.Endpoint == "" {
		dir, err := endpoint.MkdirTemp("csi-fake-", len("csi.sock"))
		if err != nil {
			return nil, err
		}
		s.tmpDirs = append(s.tmpDirs, dir)
		opts.Endpoint = endpoint.URL(filepath.Join(dir, "csi.sock"))
	}
	sockPath, err := endpoint.Parse(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	fx := opts.Fixtures
	if fx == nil && opts.FixturesFile != "" {
		n, err := fixtures.Load(opts.FixturesFile)
		if err != nil {
			return nil, err
		}
		fx = &n.CSI
		if fx.Empty() {
			log.Info("no csi section in the fixtures, nothing to preload", "fixtures", opts.FixturesFile)
		}
	}

	// State and data.
	dataDir, statePath := opts.DataDir, ""
	if opts.StateDir != "" {
		statePath = filepath.Join(opts.StateDir, state.FileName)
		if dataDir == "" {
			dataDir = opts.StateDir
		}
	}
	if dataDir == "" {
		// State in memory: keep the data in memory too (tmpfs), which also keeps a volume's
		// mkdir at ~10µs instead of the 70-230µs of a journaled disk.
		dir, err := os.MkdirTemp(MemoryTempDir(), "csi-fake-data-")
		if err != nil {
			return nil, err
		}
		s.tmpDirs = append(s.tmpDirs, dir)
		dataDir = dir
	}
	// A state directory is seeded once: fixtures are applied only when it has no state yet.
	_, statErr := os.Stat(statePath)
	fresh := statePath == "" || errors.Is(statErr, os.ErrNotExist)
	store, err := state.Open(statePath)
	if err != nil {
		return nil, err
	}

	if s.serving, err = fakeserver.New(fakeserver.Config{
		Methods:  Methods(),
		Recorder: opts.Recorder, TraceFile: opts.TraceFile, TraceCapacity: opts.TraceCapacity,
		Faults: opts.Faults, FaultsFile: opts.FaultsFile, FaultSeed: opts.FaultSeed,
		SocketMode: opts.SocketMode, AdminSocketMode: opts.AdminSocketMode, SocketGroup: opts.SocketGroup,
		MaxMsgSize: fakeserver.CSIMaxMsgSize,
		Log:        log,
	}); err != nil {
		return nil, err
	}

	s.drv, err = driver.New(driver.Config{
		Name: opts.DriverName, NodeID: opts.NodeID, Mode: opts.Mode,
		DataDir: dataDir, Store: store,
		Capacity: opts.Capacity, MaxVolumesPerNode: opts.MaxVolumesPerNode, Topology: opts.Topology,
		NoNodeTopology: opts.NoNodeTopology, AttachRequired: !opts.NoAttach, EphemeralOnly: opts.EphemeralOnly, Mount: opts.Mount,
		KnownNodes: opts.KnownNodes, KubeletEndpoint: opts.KubeletRegistrationPath, Log: log,
	})
	if err != nil {
		return nil, err
	}
	s.drv.SetKubeletEndpoint(sockPath)
	s.opts = opts
	if !fx.Empty() {
		if !fresh {
			log.Info("fixtures not applied: the state directory already holds state; remove it to start from the fixtures",
				"state", statePath)
		} else if err := s.drv.Preload(context.Background(), fx); err != nil {
			if statePath != "" {
				os.Remove(statePath) // so the next start applies the fixtures, as this one meant to
			}
			return nil, err
		} else {
			log.Info("preloaded the fixtures", "volumes", len(fx.Volumes), "snapshots", len(fx.Snapshots), "from", fx.Source)
		}
	}

	if err := s.serveCSI(opts.Endpoint); err != nil {
		return nil, err
	}
	if opts.ControllerEndpoint != "" {
		if err := s.serveCSI(opts.ControllerEndpoint); err != nil {
			return nil, err
		}
	}
	if opts.Register {
		if opts.Mode == driver.ModeController {
			return nil, errors.New("registration is for node plugins; --mode=controller cannot register with a kubelet")
		}
		dir := opts.PluginRegistryDir
		if dir == "" {
			dir = DefaultPluginRegistryDir
		}
		s.regEP = endpoint.URL(filepath.Join(dir, opts.DriverName+"-reg.sock"))
		if err := s.serveRegistration(s.regEP); err != nil {
			return nil, err
		}
	}
	if opts.AdminSocket != "" {
		if _, err = s.serving.ServeAdmin(opts.AdminSocket); err != nil {
			return nil, err
		}
	}
	log.Info("csi-fake serving", "endpoint", opts.Endpoint, "controllerEndpoint", opts.ControllerEndpoint,
		"mode", s.drv.Config().Mode, "driver", opts.DriverName, "node", opts.NodeID, "mount", s.drv.Config().Mount,
		"state", statePath, "registration", s.regEP, "faultSeed", s.FaultSeed())
	return s, nil
}

// Methods are the full names of the methods csi-fake serves (the CSI services and the kubelet's
// plugin registration), which its fault rules may name.
func Methods() []string {
	return faults.MethodsOf(&csi.Identity_ServiceDesc, &csi.Controller_ServiceDesc, &csi.Node_ServiceDesc,
		&csi.GroupController_ServiceDesc, &csi.SnapshotMetadata_ServiceDesc, &registerapi.Registration_ServiceDesc)
}

// MemoryTempDir returns /dev/shm when it is a writable directory (tmpfs on Linux), else the
// default temp directory.
func MemoryTempDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && unix.Access("/dev/shm", unix.W_OK) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// interceptors: the trace first (outermost, so it records injected faults too), then faults.
// A call from another process is recorded with that process's name (trace.PeerListener); for the
// others (an in-process client) Node and Identity calls are taken as the kubelet's, the rest as the
// CO's controller sidecars'.
func (s *Server) interceptors(iface string) []grpc.UnaryServerInterceptor {
	name := "csi-fake"
	rec, fs := s.serving.Recorder(), s.serving.Faults()
	if iface == trace.Registration {
		node := rec.UnaryServerInterceptor(trace.Boundary{Interface: iface, Caller: "kubelet", Callee: name})
		return []grpc.UnaryServerInterceptor{node, s.logCalls, fs.UnaryServerInterceptor()}
	}
	// Without call logging the fault rules run inside the trace interceptor itself, which saves
	// the closure gRPC's interceptor chain allocates on every call.
	var inner trace.Injector
	if !s.opts.LogCalls {
		inner = fs
	}
	node := rec.UnaryServerInterceptorWith(trace.Boundary{Interface: iface, Caller: "kubelet", Callee: name}, inner)
	ctrl := rec.UnaryServerInterceptorWith(trace.Boundary{Interface: iface, Caller: "csi-controller", Callee: name}, inner)
	byService := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, "/csi.v1.Node/") || strings.HasPrefix(info.FullMethod, "/csi.v1.Identity/") {
			return node(ctx, req, info, h)
		}
		return ctrl(ctx, req, info, h)
	}
	if s.opts.LogCalls {
		return []grpc.UnaryServerInterceptor{byService, s.logCalls, fs.UnaryServerInterceptor()}
	}
	return []grpc.UnaryServerInterceptor{byService}
}

// logCalls logs each call (installed only when Options.LogCalls is set).
func (s *Server) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	s.log.Info("call", "method", info.FullMethod, "request", protosanitizer.StripSecrets(req).String(),
		"code", status.Code(err).String(), "error", status.Convert(err).Message())
	return resp, err
}

func (s *Server) serveCSI(ep string) error {
	l, err := s.serving.Listen(ep)
	if err != nil {
		return err
	}
	rec, fs := s.serving.Recorder(), s.serving.Faults()
	g := s.serving.NewGRPC(s.interceptors(trace.CSI), []grpc.StreamServerInterceptor{
		rec.StreamServerInterceptor(trace.Boundary{Interface: trace.CSI, Caller: "backup-tool", Callee: "csi-fake"}),
		fs.StreamServerInterceptor()})
	csi.RegisterIdentityServer(g, s.drv)
	csi.RegisterControllerServer(g, s.drv)
	csi.RegisterNodeServer(g, s.drv)
	csi.RegisterGroupControllerServer(g, s.drv)
	csi.RegisterSnapshotMetadataServer(g, s.drv)
	s.serve(g, l, ep)
	return nil
}

func (s *Server) serveRegistration(ep string) error {
	// node-driver-registrar creates its socket under umask 0077: only the kubelet (root) talks to it.
	l, err := endpoint.ListenMode(ep, 0o600)
	if err != nil {
		return fmt.Errorf("registration socket: %w", err)
	}
	g := s.serving.NewGRPC(s.interceptors(trace.Registration), nil)
	registerapi.RegisterRegistrationServer(g, s.drv.Registration())
	s.serve(g, l, ep)
	return nil
}

// serve serves g on l; the kubelet and the sidecars share the Identity service, so the method alone
// cannot tell them apart: the trace names each connection after the process that made it
// (kubelet, external-provisioner, external-attacher, ...).
func (s *Server) serve(g *grpc.Server, l net.Listener, ep string) {
	s.endpoints = append(s.endpoints, ep)
	s.serving.Serve(g, l)
}

// Endpoint returns the CSI socket (unix://...).
func (s *Server) Endpoint() string { return s.opts.Endpoint }

// ControllerEndpoint returns the separate controller socket, or "" when there is none.
func (s *Server) ControllerEndpoint() string { return s.opts.ControllerEndpoint }

// RegistrationEndpoint returns the kubelet registration socket, or "" without --register.
func (s *Server) RegistrationEndpoint() string { return s.regEP }

// RegistrationStatus returns what the kubelet last reported through NotifyRegistrationStatus.
func (s *Server) RegistrationStatus() driver.RegistrationStatus { return s.drv.RegistrationStatus() }

// Recorder returns the trace recorder.
func (s *Server) Recorder() *trace.Recorder { return s.serving.Recorder() }

// Faults returns the fault rules.
func (s *Server) Faults() *faults.Set { return s.serving.Faults() }

// FaultSeed is the seed of the fault rules' random choices (Options.FaultSeed, the faults file's
// seed, or the random one chosen at start): start with it to repeat a run.
func (s *Server) FaultSeed() uint64 { return s.serving.Faults().Seed() }

// Driver returns the CSI driver (its state store, its configuration).
func (s *Server) Driver() *driver.Driver { return s.drv }

// Close stops serving (in-flight calls are cut off after a short grace period), removes the
// sockets and the temp directories. State in StateDir stays; volumes still bind-mounted stay
// mounted (as a crashed driver's would).
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.serving != nil {
			s.closeErr = s.serving.Close()
		}
		for _, ep := range s.endpoints {
			if p, err := endpoint.Parse(ep); err == nil {
				os.Remove(p)
			}
		}
		if s.drv != nil {
			s.closeErr = errors.Join(s.closeErr, s.drv.Close())
		}
		for _, d := range s.tmpDirs {
			os.RemoveAll(d)
		}
	})
	return s.closeErr
}
