// Package server wires cri-fake together and serves it: the runtime and image services on one
// unix socket (or two), behind the trace and fault interceptors, with an optional admin socket.
// Start runs a complete cri-fake in-process, ready when it returns, with no package-level state,
// so one test can run several.
package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/runtime"
	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/fixtures"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
	"github.com/plugsim/plugsim/internal/fakeserver"
)

// Options configure a cri-fake server. The zero value is a working in-process server: a socket
// in a fresh temporary directory, CNI off (pods get addresses from a built-in allocator), the
// built-in image catalog, memory-only state.
type Options struct {
	// Endpoint is the unix socket to serve on ("unix:///run/plugsim/cri.sock"); empty means a
	// fresh socket in a temporary directory.
	Endpoint string
	// Listener, when set, is served instead of listening on Endpoint.
	Listener net.Listener
	// ImageEndpoint, when set and different from Endpoint, serves the ImageService on its own
	// socket (the kubelet's --image-service-endpoint).
	ImageEndpoint string
	// AdminSocket, when set, serves the admin API (trace and fault rules) on that unix socket.
	AdminSocket string
	// SocketMode is the mode of the CRI sockets (0: 0660); AdminSocketMode that of the admin
	// socket (0: 0600, it can change what cri-fake does). SocketGroup (a group name or number)
	// owns them all; empty leaves the process's group.
	SocketMode      os.FileMode
	AdminSocketMode os.FileMode
	SocketGroup     string

	// StateDir, when set, persists sandboxes, containers and images there and reloads them.
	StateDir string
	// Fixtures are the images, pods and containers cri-fake holds when it starts (preloaded
	// before it serves, through the RPCs' checks); nil means FixturesFile's cri section, or
	// none. With a StateDir they seed it: they are applied only when it holds no state yet.
	Fixtures     *fixtures.CRI
	FixturesFile string
	// RootDir holds netns files, the CNI cache and the log directories of sandboxes that bring
	// none; empty means a temporary directory removed by Close.
	RootDir string

	// CNIConfDir is the CNI configuration directory; empty turns CNI off.
	CNIConfDir string
	// CNIBinDirs are searched for CNI plugins (default /opt/cni/bin).
	CNIBinDirs []string
	// CNIExec runs the CNI plugins; nil execs their binaries from CNIBinDirs, as containerd
	// does. inprocess.New() (package cni-fake/inprocess) runs cni-fake in this process instead.
	CNIExec invoke.Exec
	// CNIConfTemplate is a CNI config template (containerd's conf_template): rendered with the pod
	// CIDRs of UpdateRuntimeConfig into CNIConfDir/10-containerd-net.conflist while no config is
	// loaded. Empty: nothing is written, the config must come from elsewhere.
	CNIConfTemplate string
	// NetNS is "placeholder" (default) or "real" (root only: real network namespaces).
	NetNS string

	// RuntimeHandlers accepted by RunPodSandbox (default {"runc"}).
	RuntimeHandlers []string
	// CgroupDriver reported by RuntimeConfig: "cgroupfs" (default) or "systemd".
	CgroupDriver string

	// Catalog is the image catalog; nil means ImageCatalog's file, or the built-in catalog.
	Catalog *images.Catalog
	// ImageCatalog is a YAML catalog file merged over the built-in images.
	ImageCatalog string

	// Recorder records the trace; nil means a new one (TraceCapacity events, TraceFile).
	Recorder      *trace.Recorder
	TraceFile     string
	TraceCapacity int
	// Caller names the client side of the boundary in trace events (default "kubelet") when the
	// call does not say who makes it: calls from another process are named after that process
	// (trace.PeerListener), calls carrying trace.CallerMetadata by it.
	Caller string

	// Faults are the fault rules; nil means the rules of FaultsFile, or none.
	Faults     *faults.Set
	FaultsFile string
	// FaultSeed seeds the random choices of probabilistic rules; 0 means the faults file's seed,
	// else a fresh random one. The seed is logged at start, reported by Server.FaultSeed, and
	// recorded in the trace event of every call a rule faulted (attrs.faultSeed): start again with
	// it and the same calls to repeat a run. A given Faults set keeps its own seed.
	FaultSeed uint64

	// Launcher starts container processes; nil means the process simulation
	// (runtime.NewSimulated: cri-fake/process runs each container's command).
	Launcher runtime.Launcher
	// Streaming hands out Exec, Attach and PortForward session URLs; nil means k8s.io/cri-streaming's
	// server over the runtime's processes, serving HTTP on StreamingAddr.
	Streaming runtime.Streaming
	// Runc is the runc binary that runs the containers of program images (images.Program) in pods
	// of ProgramHandlers (cri-fake/oci); empty: none, every container is simulated. Needs root.
	Runc string
	// ProgramDir holds the programs the catalog names (default: "programs" beside Runc).
	ProgramDir string
	// ProgramHandlers are the runtime handlers whose pods run program images under runc (nil:
	// oci.DefaultHandlers, the default handler and "runc").
	ProgramHandlers []string
	// CgroupParent is the cgroup program containers' cgroups are made in (default
	// "plugsim-cri-fake-<hash of RootDir>"; see cri-fake/oci).
	CgroupParent string

	// StreamingAddr is the host:port the streaming server listens on (default "127.0.0.1:0", an
	// ephemeral loopback port); "none" serves no streaming (Exec, Attach and PortForward answer
	// Unimplemented).
	StreamingAddr string

	// Log receives diagnostics as structured records (a recovered handler panic among them);
	// Logf, when Log is nil, receives them as printf-style lines. Both nil: discarded.
	Log  *slog.Logger
	Logf func(format string, args ...any)
}

// Server is a running cri-fake.
type Server struct {
	endpoint, imageEndpoint, adminEndpoint string

	serving      *fakeserver.Scaffold // trace, faults, gRPC servers, admin API
	log          *slog.Logger
	runtime      *runtime.Service
	images       *images.Service
	tmpDirs      []string
	streaming    *http.Server
	streamingURL string
	preloading   atomic.Bool // the CNI calls now are a preload's
	closeOnce    sync.Once
	closeErr     error
	wg           sync.WaitGroup // the streaming server's goroutine
}

// Start builds and serves a cri-fake. When it returns without error the sockets accept calls.
func Start(opts Options) (_ *Server, retErr error) {
	s := &Server{}
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	logf := opts.Logf
	switch {
	case opts.Log != nil:
		s.log, logf = opts.Log, fakeserver.Logf(opts.Log)
	case logf != nil:
		s.log = fakeserver.LogfLogger(logf)
	default:
		s.log, logf = slog.New(slog.DiscardHandler), func(string, ...any) {}
	}
	tmpRoot, err := s.rootDir(&opts)
	if err != nil {
		return nil, err
	}
	if s.serving, err = fakeserver.New(fakeserver.Config{
		Methods:  Methods(),
		Recorder: opts.Recorder, TraceFile: opts.TraceFile, TraceCapacity: opts.TraceCapacity,
		Faults: opts.Faults, FaultsFile: opts.FaultsFile, FaultSeed: opts.FaultSeed,
		SocketMode: opts.SocketMode, AdminSocketMode: opts.AdminSocketMode, SocketGroup: opts.SocketGroup,
		MaxMsgSize: fakeserver.CRIMaxMsgSize,
		Log:        s.log,
		Encode:     encodeListing, // the relist's answers (listwire.go)
	}); err != nil {
		return nil, err
	}
	fx, err := loadFixtures(opts, logf)
	if err != nil {
		return nil, err
	}
	var fileState *store.FileState
	if opts.StateDir != "" {
		if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
		fileState = &store.FileState{Dir: opts.StateDir}
	}
	if s.images, err = newImages(opts, fileState, logf); err != nil {
		return nil, err
	}
	if s.runtime, err = s.newRuntime(opts, fileState, logf); err != nil {
		return nil, err
	}
	loaded, err := s.restore(opts.StateDir, fileState, logf)
	if err != nil {
		return nil, err
	}
	if err := s.preload(s.runtime, fx, fileState, loaded, logf); err != nil {
		return nil, err
	}
	if err := s.serveCRI(opts, tmpRoot); err != nil {
		return nil, err
	}
	if opts.AdminSocket != "" {
		if s.adminEndpoint, err = s.serving.ServeAdmin(opts.AdminSocket); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// rootDir makes the root directory. With neither a root dir nor an endpoint given, one temporary
// directory holds both (the socket beside the root's netns, cni-cache and log directories): a
// directory fewer to make and remove, a tenth of the zero Options' start (BenchmarkStartUp). It
// returns that directory ("" when the root dir was given).
func (s *Server) rootDir(opts *Options) (tmpRoot string, err error) {
	if opts.RootDir == "" {
		d, err := endpoint.MkdirTemp("cri-fake-", len("cri.sock"))
		if err != nil {
			return "", err
		}
		s.tmpDirs = append(s.tmpDirs, d)
		opts.RootDir, tmpRoot = d, d
	}
	if err := os.MkdirAll(opts.RootDir, 0o755); err != nil {
		return "", fmt.Errorf("root dir: %w", err)
	}
	return tmpRoot, nil
}

// loadFixtures returns the fixtures to preload: the options' own, or FixturesFile's cri section.
func loadFixtures(opts Options, logf func(string, ...any)) (*fixtures.CRI, error) {
	if opts.Fixtures != nil || opts.FixturesFile == "" {
		return opts.Fixtures, nil
	}
	n, err := fixtures.Load(opts.FixturesFile)
	if err != nil {
		return nil, err
	}
	if n.CRI.Empty() {
		logf("fixtures %s: no cri section, nothing to preload", opts.FixturesFile)
	}
	return &n.CRI, nil
}

// newImages builds the image service over the catalog; with a state dir, every change of the
// image store is saved.
func newImages(opts Options, fileState *store.FileState, logf func(string, ...any)) (*images.Service, error) {
	catalog := opts.Catalog
	if catalog == nil && opts.ImageCatalog != "" {
		c, err := images.LoadCatalog(opts.ImageCatalog)
		if err != nil {
			return nil, err
		}
		catalog = c
	}
	var imgSvc *images.Service
	imgOpts := images.Options{Catalog: catalog, FSPath: opts.RootDir}
	if fileState != nil {
		imgOpts.OnChange = func() {
			var recs []store.ImageRecord
			for _, img := range imgSvc.Store().List() {
				rec := store.ImageRecord{ID: img.ID, RepoTags: img.RepoTags, RepoDigests: img.RepoDigests, Pinned: img.Pinned}
				if findByID(imgSvc.Catalog(), img.ID) == nil {
					// A fixture's image: the catalog cannot give its config back at the restart.
					rec.Config, _ = json.Marshal(img.Config)
				}
				recs = append(recs, rec)
			}
			if err := fileState.SaveImages(recs); err != nil {
				logf("save images: %v", err)
			}
		}
	}
	imgSvc = images.NewService(imgOpts)
	return imgSvc, nil
}

// newNetwork returns the CNI plugin of the options (nil: CNI off, the built-in allocator) and the
// CNI binary directories.
func (s *Server) newNetwork(opts Options, logf func(string, ...any)) (network.Plugin, []string, error) {
	binDirs := opts.CNIBinDirs
	if len(binDirs) == 0 {
		binDirs = []string{"/opt/cni/bin"}
	}
	if opts.CNIConfTemplate != "" {
		if opts.CNIConfDir == "" {
			return nil, nil, errors.New("a CNI config template needs a CNI conf dir to render into (CNI is off)")
		}
		if err := network.CheckConfTemplate(opts.CNIConfTemplate); err != nil {
			return nil, nil, err
		}
	}
	if opts.CNIConfDir == "" {
		return nil, binDirs, nil
	}
	return network.NewCNI(network.CNIOptions{
		ConfDir:      opts.CNIConfDir,
		BinDirs:      binDirs,
		CacheDir:     filepath.Join(opts.RootDir, "cni-cache"),
		Exec:         opts.CNIExec,
		ConfTemplate: opts.CNIConfTemplate,
		Logf:         logf,
		Observe:      s.observeCNI,
	}), binDirs, nil
}

// newRuntime builds the runtime service over the images and the network, and the streaming server
// its Exec, Attach and PortForward hand out (unless the options bring their own, or none).
func (s *Server) newRuntime(opts Options, fileState *store.FileState, logf func(string, ...any)) (*runtime.Service, error) {
	netPlugin, binDirs, err := s.newNetwork(opts, logf)
	if err != nil {
		return nil, err
	}
	netnsMode := cmp.Or(opts.NetNS, network.NetNSPlaceholder)
	if netnsMode != network.NetNSPlaceholder && netnsMode != network.NetNSReal {
		return nil, fmt.Errorf("netns mode %q: want %q or %q", netnsMode, network.NetNSPlaceholder, network.NetNSReal)
	}
	if netnsMode == network.NetNSReal && os.Geteuid() != 0 {
		return nil, errors.New("--netns=real needs root (it creates network namespaces)")
	}
	info := map[string]any{"stateDir": opts.StateDir, "imageCatalog": opts.ImageCatalog}
	if opts.CNIConfDir != "" {
		info["cni"] = map[string]any{"confDir": opts.CNIConfDir, "binDirs": binDirs, "confTemplate": opts.CNIConfTemplate}
	} else {
		info["cni"] = map[string]any{"disabled": true}
	}
	streamingURLs := opts.Streaming
	var lazy *lazyStreaming
	if streamingURLs == nil && opts.StreamingAddr != "none" {
		lazy = &lazyStreaming{}
		streamingURLs = lazy
	}
	launcher, err := s.newLauncher(opts, info, logf)
	if err != nil {
		return nil, err
	}
	rt, err := runtime.New(runtime.Options{
		RootDir:         opts.RootDir,
		RuntimeHandlers: opts.RuntimeHandlers,
		CgroupDriver:    opts.CgroupDriver,
		Images:          s.images,
		Network:         netPlugin,
		NetNS:           network.NetNSManager{Dir: filepath.Join(opts.RootDir, "netns"), Mode: netnsMode},
		Launcher:        launcher,
		Streaming:       streamingURLs,
		Persister:       persister(fileState),
		Info:            info,
		Logf:            logf,
	})
	if err != nil {
		return nil, err
	}
	if lazy != nil {
		if err := s.startStreaming(opts.StreamingAddr, rt, lazy); err != nil {
			rt.Close()
			return nil, err
		}
	}
	return rt, nil
}

// restore reloads the images, sandboxes and containers saved in the state dir.
func (s *Server) restore(stateDir string, fileState *store.FileState, logf func(string, ...any)) (store.Loaded, error) {
	if fileState == nil {
		return store.Loaded{}, nil
	}
	loaded, err := fileState.Load()
	if err != nil {
		return loaded, err
	}
	for _, r := range loaded.Images {
		cfg := findByID(s.images.Catalog(), r.ID)
		if cfg == nil && len(r.Config) > 0 {
			cfg = &images.CatalogImage{}
			if err := json.Unmarshal(r.Config, cfg); err != nil {
				return loaded, fmt.Errorf("state file %s: image %s: %w", filepath.Join(stateDir, "images.json"), r.ID, err)
			}
		}
		if cfg == nil {
			logf("restore image %s: not in the catalog any more; dropping it", r.ID)
			continue
		}
		s.images.Store().Restore(images.Image{ID: r.ID, RepoTags: r.RepoTags, RepoDigests: r.RepoDigests, Pinned: r.Pinned, Config: cfg})
	}
	s.runtime.Restore(context.Background(), loaded)
	return loaded, nil
}

// serveCRI serves the RuntimeService and ImageService on the endpoint (the ImageService on its own
// socket when ImageEndpoint names another), behind the trace and fault interceptors.
func (s *Server) serveCRI(opts Options, tmpRoot string) error {
	caller := cmp.Or(opts.Caller, "kubelet")
	boundary := trace.Boundary{Interface: trace.CRI, Caller: caller, Callee: "cri-fake"}
	rec, fs := s.serving.Recorder(), s.serving.Faults()
	newGRPC := func() *grpc.Server {
		// The fault rules run inside the trace, so an injected fault is what the trace shows.
		return s.serving.NewGRPC([]grpc.UnaryServerInterceptor{rec.UnaryServerInterceptorWith(boundary, fs)},
			[]grpc.StreamServerInterceptor{rec.StreamServerInterceptor(boundary), fs.StreamServerInterceptor()})
	}
	l := opts.Listener
	if l == nil {
		ep := opts.Endpoint
		if ep == "" && tmpRoot != "" {
			ep = endpoint.URL(filepath.Join(tmpRoot, "cri.sock"))
		} else if ep == "" {
			d, err := endpoint.MkdirTemp("cri-fake-", len("cri.sock"))
			if err != nil {
				return err
			}
			s.tmpDirs = append(s.tmpDirs, d)
			ep = endpoint.URL(filepath.Join(d, "cri.sock"))
		}
		var err error
		if l, err = s.serving.Listen(ep); err != nil {
			return err
		}
	}
	s.endpoint = endpoint.URL(l.Addr().String())
	main := newGRPC()
	runtimeapi.RegisterRuntimeServiceServer(main, s.runtime)
	s.imageEndpoint = s.endpoint
	if opts.ImageEndpoint != "" && opts.ImageEndpoint != opts.Endpoint {
		il, err := s.serving.Listen(opts.ImageEndpoint)
		if err != nil {
			l.Close()
			return err
		}
		img := newGRPC()
		runtimeapi.RegisterImageServiceServer(img, s.images)
		s.imageEndpoint = endpoint.URL(il.Addr().String())
		s.serving.Serve(img, il)
	} else {
		runtimeapi.RegisterImageServiceServer(main, s.images)
	}
	s.serving.Serve(main, l)
	return nil
}

// preload applies the fixtures before anything is served. A state directory is seeded once: when
// it already holds state (from an earlier run, or from these fixtures before), that state is what
// a restart must find, so the fixtures are not applied again.
func (s *Server) preload(rt *runtime.Service, fx *fixtures.CRI, fileState *store.FileState, loaded store.Loaded, logf func(string, ...any)) error {
	if fx.Empty() {
		return nil
	}
	if fileState != nil {
		if from, ok := fileState.Seeded(); ok {
			logf("fixtures not applied: state dir %s was seeded from %s already; remove it to start from the fixtures again", fileState.Dir, from)
			return nil
		}
		if !loaded.Empty() {
			logf("fixtures not applied: state dir %s already holds state (%d sandboxes, %d containers, %d images); remove it to start from the fixtures",
				fileState.Dir, len(loaded.Sandboxes), len(loaded.Containers), len(loaded.Images))
			return nil
		}
	}
	s.preloading.Store(true)
	err := rt.Preload(context.Background(), fx)
	s.preloading.Store(false)
	if err != nil {
		return err
	}
	logf("preloaded %d images, %d pods and %d containers from %s", len(fx.Images), len(fx.Pods), len(fx.Containers), sourceName(fx.Source))
	if fileState != nil {
		if err := fileState.SaveSeeded(sourceName(fx.Source)); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	}
	return nil
}

func sourceName(s string) string {
	if s == "" {
		return "fixtures given in Go"
	}
	return s
}

func persister(fs *store.FileState) runtime.Persister {
	if fs == nil {
		return nil
	}
	return fs
}

func findByID(c *images.Catalog, id string) *images.CatalogImage {
	for _, img := range c.Images() {
		if img.ID == id {
			return img
		}
	}
	return nil
}

// observeCNI records each CNI ADD/DEL cri-fake makes as a CNI trace event (cri-fake → plugin).
func (s *Server) observeCNI(verb string, pod network.Pod, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf, res cnitypes.Result, err error, took time.Duration) {
	ev := trace.Event{
		Time:       time.Now().Add(-took),
		Interface:  trace.CNI,
		Caller:     "cri-fake",
		Callee:     list.Name,
		Service:    pluginTypes(list),
		Method:     verb,
		Code:       "OK",
		DurationNS: int64(took),
		Attrs: map[string]string{
			"containerID": rt.ContainerID, "netns": rt.NetNS, "ifName": rt.IfName,
			"pod": pod.Config.GetMetadata().GetNamespace() + "/" + pod.Config.GetMetadata().GetName(),
		},
	}
	if s.preloading.Load() {
		ev.Attrs["preload"] = "true" // the ADD of a READY pod among the fixtures, before serving
	}
	if err != nil {
		ev.Error = err.Error()
		ev.Code = "ERROR"
		var ce *cnitypes.Error
		if errors.As(err, &ce) {
			ev.Code = strconv.FormatUint(uint64(ce.Code), 10)
		}
	}
	ev.SetRenderer(func(e *trace.Event) {
		args := map[string]string{}
		for _, a := range rt.Args {
			args[a[0]] = a[1]
		}
		e.Request, _ = json.Marshal(map[string]any{"config": json.RawMessage(list.Bytes), "args": args, "capabilityArgs": rt.CapabilityArgs})
		if res != nil {
			e.Response, _ = json.Marshal(res)
		}
	})
	s.serving.Recorder().Record(ev)
}

func pluginTypes(list *libcni.NetworkConfigList) string {
	t := ""
	for i, p := range list.Plugins {
		if i > 0 {
			t += ","
		}
		t += p.Network.Type
	}
	return t
}

// Endpoint is the runtime socket, as unix:///path.
func (s *Server) Endpoint() string { return s.endpoint }

// ImageEndpoint is the image socket (the runtime socket unless split).
func (s *Server) ImageEndpoint() string { return s.imageEndpoint }

// AdminEndpoint is the admin socket ("" when not served).
func (s *Server) AdminEndpoint() string { return s.adminEndpoint }

// Recorder is the trace of every call served.
func (s *Server) Recorder() *trace.Recorder { return s.serving.Recorder() }

// Faults are the fault rules applied to every call; change them at any time.
func (s *Server) Faults() *faults.Set { return s.serving.Faults() }

// FaultSeed is the seed of the fault rules' random choices (Options.FaultSeed, the faults file's
// seed, or the random one chosen at start): start with it to repeat a run.
func (s *Server) FaultSeed() uint64 { return s.serving.Faults().Seed() }

// Methods are the full names of the methods cri-fake serves (runtime.v1 RuntimeService and
// ImageService), which its fault rules may name.
func Methods() []string {
	return faults.MethodsOf(&runtimeapi.RuntimeService_ServiceDesc, &runtimeapi.ImageService_ServiceDesc)
}

// Runtime is the RuntimeService implementation (for direct inspection in tests).
func (s *Server) Runtime() *runtime.Service { return s.runtime }

// Images is the ImageService implementation.
func (s *Server) Images() *images.Service { return s.images }

// Close stops serving (in-flight calls are cut off after a short grace period), closes the
// trace file it opened and removes the temporary directories it made. State in StateDir stays.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.runtime != nil {
			s.runtime.Close() // ends GetContainerEvents streams, so the graceful stop does not wait on them
		}
		if s.streaming != nil {
			s.streaming.Close() // and every exec, attach and port-forward session
		}
		s.wg.Wait()
		if s.serving != nil {
			s.closeErr = s.serving.Close()
		}
		for _, d := range s.tmpDirs {
			// Real network namespaces of sandboxes never stopped are bind mounts under the root
			// dir; detach them first, or the directory cannot be removed.
			if ents, err := os.ReadDir(filepath.Join(d, "netns")); err == nil {
				ns := network.NetNSManager{Dir: filepath.Join(d, "netns"), Mode: network.NetNSReal}
				for _, e := range ents {
					ns.Remove(filepath.Join(d, "netns", e.Name()))
				}
			}
			os.RemoveAll(d)
		}
	})
	return s.closeErr
}

// lazyStreaming lets the runtime be built before the streaming server that serves its sessions,
// and builds that server only when the first Exec, Attach or PortForward asks for a URL (or the
// first request reaches its port): building it registers its HTTP routes, a fifth of what Start
// took (BenchmarkStartUp), which a test that never execs need not pay.
type lazyStreaming struct {
	once  sync.Once
	build func() (streaming.Server, error)
	srv   streaming.Server
	err   error
}

func (l *lazyStreaming) server() (streaming.Server, error) {
	l.once.Do(func() { l.srv, l.err = l.build() })
	return l.srv, l.err
}

func (l *lazyStreaming) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	srv, err := l.server()
	if err != nil {
		return nil, err
	}
	return srv.GetExec(req)
}

func (l *lazyStreaming) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	srv, err := l.server()
	if err != nil {
		return nil, err
	}
	return srv.GetAttach(req)
}

func (l *lazyStreaming) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	srv, err := l.server()
	if err != nil {
		return nil, err
	}
	return srv.GetPortForward(req)
}

func (l *lazyStreaming) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	srv, err := l.server()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	srv.ServeHTTP(w, r)
}

// startStreaming serves k8s.io/cri-streaming's server over the runtime's processes on addr (the
// URL clients get from Exec, Attach and PortForward names the port actually bound). The port is
// bound now, so the URL is known; the server behind it is built on first use (lazyStreaming).
//
// As containerd's (stream_server_address 127.0.0.1 by default), it listens on loopback unless
// told otherwise, and each URL carries a single-use token (cri-streaming's request cache: 8
// characters from crypto/rand, valid for a minute, consumed by the first request), so a process
// that can reach the port but was not handed the URL cannot open a session.
func (s *Server) startStreaming(addr string, rt *runtime.Service, into *lazyStreaming) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("streaming server: %w", err)
	}
	if ap, err := netip.ParseAddrPort(l.Addr().String()); err == nil && !ap.Addr().IsLoopback() {
		s.log.Warn("the streaming server listens beyond loopback, as --streaming-addr asked: whoever reaches it with a session URL can exec into containers", "addr", l.Addr().String())
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = l.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: l.Addr().String()}
	sessions := rt.SessionRuntime()
	into.build = func() (streaming.Server, error) {
		srv, err := streaming.NewServer(cfg, sessions)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "streaming server: %v", err)
		}
		return srv, nil
	}
	s.streaming = &http.Server{Handler: into, ReadHeaderTimeout: 30 * time.Second}
	s.streamingURL = cfg.BaseURL.String()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.streaming.Serve(l)
	}()
	return nil
}

// StreamingURL is the base URL of the streaming server ("" when none is served).
func (s *Server) StreamingURL() string { return s.streamingURL }
