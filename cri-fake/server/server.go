// Package server wires cri-fake together and serves it: the runtime and image services on one
// unix socket (or two), behind the trace and fault interceptors, with an optional admin socket.
// Start runs a complete cri-fake in-process, ready when it returns, with no package-level state,
// so one test can run several.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
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
	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/fixtures"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
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

	// Launcher starts container processes; nil means the process simulation
	// (runtime.NewSimulated: cri-fake/process runs each container's command).
	Launcher runtime.Launcher
	// Streaming hands out Exec, Attach and PortForward session URLs; nil means k8s.io/cri-streaming's
	// server over the runtime's processes, serving HTTP on StreamingAddr.
	Streaming runtime.Streaming
	// StreamingAddr is the host:port the streaming server listens on (default "127.0.0.1:0", an
	// ephemeral loopback port); "none" serves no streaming (Exec, Attach and PortForward answer
	// Unimplemented).
	StreamingAddr string

	// Logf receives diagnostics (default: discard).
	Logf func(format string, args ...any)
}

// Server is a running cri-fake.
type Server struct {
	endpoint, imageEndpoint, adminEndpoint string

	rec          *trace.Recorder
	ownRec       bool
	faults       *faults.Set
	runtime      *runtime.Service
	images       *images.Service
	grpc         []*grpc.Server
	admin        *admin.Server
	tmpDirs      []string
	streaming    *http.Server
	streamingURL string
	preloading   atomic.Bool // the CNI calls now are a preload's
	closeOnce    sync.Once
	closeErr     error
	wg           sync.WaitGroup
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
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// With neither a root dir nor an endpoint given, one temporary directory holds both (the
	// socket beside the root's netns, cni-cache and log directories): a directory fewer to make
	// and remove, a tenth of the zero Options' start (BenchmarkStartUp).
	tmpRoot := ""
	if opts.RootDir == "" {
		d, err := endpoint.MkdirTemp("cri-fake-", len("cri.sock"))
		if err != nil {
			return nil, err
		}
		s.tmpDirs = append(s.tmpDirs, d)
		opts.RootDir, tmpRoot = d, d
	}
	if err := os.MkdirAll(opts.RootDir, 0o755); err != nil {
		return nil, fmt.Errorf("root dir: %w", err)
	}

	// Trace and faults.
	s.rec = opts.Recorder
	if s.rec == nil {
		r, err := trace.New(trace.Options{Capacity: opts.TraceCapacity, File: opts.TraceFile})
		if err != nil {
			return nil, err
		}
		s.rec, s.ownRec = r, true
	}
	s.faults = opts.Faults
	// The set knows the methods served, so a rule naming another one is refused.
	fopts := []faults.Option{faults.WithMethods(Methods()...), faults.WithGRPCCodes()}
	if s.faults == nil && opts.FaultsFile != "" {
		fs, err := faults.Load(opts.FaultsFile, fopts...)
		if err != nil {
			return nil, err
		}
		s.faults = fs
	}
	if s.faults == nil {
		s.faults = faults.NewSet(uint64(time.Now().UnixNano()), fopts...)
	}

	fx := opts.Fixtures
	if fx == nil && opts.FixturesFile != "" {
		n, err := fixtures.Load(opts.FixturesFile)
		if err != nil {
			return nil, err
		}
		fx = &n.CRI
		if fx.Empty() {
			logf("fixtures %s: no cri section, nothing to preload", opts.FixturesFile)
		}
	}

	// Images.
	catalog := opts.Catalog
	if catalog == nil && opts.ImageCatalog != "" {
		c, err := images.LoadCatalog(opts.ImageCatalog)
		if err != nil {
			return nil, err
		}
		catalog = c
	}
	var fileState *store.FileState
	if opts.StateDir != "" {
		if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
		fileState = &store.FileState{Dir: opts.StateDir}
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
	s.images = imgSvc

	// Network.
	caller := opts.Caller
	if caller == "" {
		caller = "kubelet"
	}
	var netPlugin network.Plugin
	binDirs := opts.CNIBinDirs
	if len(binDirs) == 0 {
		binDirs = []string{"/opt/cni/bin"}
	}
	if opts.CNIConfTemplate != "" {
		if opts.CNIConfDir == "" {
			return nil, errors.New("a CNI config template needs a CNI conf dir to render into (CNI is off)")
		}
		if err := network.CheckConfTemplate(opts.CNIConfTemplate); err != nil {
			return nil, err
		}
	}
	if opts.CNIConfDir != "" {
		netPlugin = network.NewCNI(network.CNIOptions{
			ConfDir:      opts.CNIConfDir,
			BinDirs:      binDirs,
			CacheDir:     filepath.Join(opts.RootDir, "cni-cache"),
			Exec:         opts.CNIExec,
			ConfTemplate: opts.CNIConfTemplate,
			Logf:         logf,
			Observe:      s.observeCNI,
		})
	}
	netnsMode := opts.NetNS
	if netnsMode == "" {
		netnsMode = network.NetNSPlaceholder
	}
	if netnsMode != network.NetNSPlaceholder && netnsMode != network.NetNSReal {
		return nil, fmt.Errorf("netns mode %q: want %q or %q", netnsMode, network.NetNSPlaceholder, network.NetNSReal)
	}
	if netnsMode == network.NetNSReal && os.Geteuid() != 0 {
		return nil, errors.New("--netns=real needs root (it creates network namespaces)")
	}

	// Runtime.
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
	rt, err := runtime.New(runtime.Options{
		RootDir:         opts.RootDir,
		RuntimeHandlers: opts.RuntimeHandlers,
		CgroupDriver:    opts.CgroupDriver,
		Images:          imgSvc,
		Network:         netPlugin,
		NetNS:           network.NetNSManager{Dir: filepath.Join(opts.RootDir, "netns"), Mode: netnsMode},
		Launcher:        opts.Launcher,
		Streaming:       streamingURLs,
		Persister:       persister(fileState),
		Info:            info,
		Logf:            logf,
	})
	if err != nil {
		return nil, err
	}
	s.runtime = rt
	if lazy != nil {
		if err := s.startStreaming(opts.StreamingAddr, lazy); err != nil {
			return nil, err
		}
	}
	var loaded store.Loaded
	if fileState != nil {
		if loaded, err = fileState.Load(); err != nil {
			return nil, err
		}
		for _, r := range loaded.Images {
			cfg := findByID(imgSvc.Catalog(), r.ID)
			if cfg == nil && len(r.Config) > 0 {
				cfg = &images.CatalogImage{}
				if err := json.Unmarshal(r.Config, cfg); err != nil {
					return nil, fmt.Errorf("state file %s: image %s: %w", filepath.Join(opts.StateDir, "images.json"), r.ID, err)
				}
			}
			if cfg == nil {
				logf("restore image %s: not in the catalog any more; dropping it", r.ID)
				continue
			}
			imgSvc.Store().Restore(images.Image{ID: r.ID, RepoTags: r.RepoTags, RepoDigests: r.RepoDigests, Pinned: r.Pinned, Config: cfg})
		}
		rt.Restore(context.Background(), loaded)
	}
	if err := s.preload(rt, fx, fileState, loaded, logf); err != nil {
		return nil, err
	}

	// gRPC.
	boundary := trace.Boundary{Interface: trace.CRI, Caller: caller, Callee: "cri-fake"}
	newGRPC := func() *grpc.Server {
		return grpc.NewServer(
			// The fault rules run inside the trace, so an injected fault is what the trace shows.
			grpc.UnaryInterceptor(s.rec.UnaryServerInterceptorWith(boundary, s.faults)),
			grpc.ChainStreamInterceptor(s.rec.StreamServerInterceptor(boundary), s.faults.StreamServerInterceptor()),
			grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20),
			// Calls run on a few long-lived worker goroutines instead of a new goroutine per
			// call, whose stack would grow (and be copied) through the interceptors and the
			// handler on every call: about a tenth of a kubelet-style pod lifecycle over the
			// socket (BenchmarkPodLifecycle, A/B interleaved). When every worker is busy (a
			// GetContainerEvents stream holds one for its whole life), gRPC starts a goroutine
			// for the call as it does without workers.
			grpc.NumStreamWorkers(uint32(max(4, goruntime.GOMAXPROCS(0)))),
		)
	}
	l := opts.Listener
	if l == nil {
		ep := opts.Endpoint
		if ep == "" && tmpRoot != "" {
			ep = endpoint.URL(filepath.Join(tmpRoot, "cri.sock"))
		} else if ep == "" {
			d, err := endpoint.MkdirTemp("cri-fake-", len("cri.sock"))
			if err != nil {
				return nil, err
			}
			s.tmpDirs = append(s.tmpDirs, d)
			ep = endpoint.URL(filepath.Join(d, "cri.sock"))
		}
		if l, err = endpoint.Listen(ep); err != nil {
			return nil, err
		}
	}
	s.endpoint = endpoint.URL(l.Addr().String())
	main := newGRPC()
	runtimeapi.RegisterRuntimeServiceServer(main, rt)
	s.imageEndpoint = s.endpoint
	if opts.ImageEndpoint != "" && opts.ImageEndpoint != opts.Endpoint {
		il, err := endpoint.Listen(opts.ImageEndpoint)
		if err != nil {
			l.Close()
			return nil, err
		}
		img := newGRPC()
		runtimeapi.RegisterImageServiceServer(img, imgSvc)
		s.imageEndpoint = endpoint.URL(il.Addr().String())
		s.serve(img, il)
	} else {
		runtimeapi.RegisterImageServiceServer(main, imgSvc)
	}
	s.serve(main, l)

	if opts.AdminSocket != "" {
		a, err := admin.Serve(opts.AdminSocket, s.rec, s.faults)
		if err != nil {
			return nil, err
		}
		s.admin = a
		p, _ := endpoint.Parse(opts.AdminSocket)
		s.adminEndpoint = endpoint.URL(p)
	}
	return s, nil
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

// serve serves g on l; each connection is named after the process that made it (the kubelet,
// crictl), which is what the trace records as the caller (trace.PeerListener).
func (s *Server) serve(g *grpc.Server, l net.Listener) {
	s.grpc = append(s.grpc, g)
	s.wg.Add(1)
	l = trace.PeerListener(l)
	go func() {
		defer s.wg.Done()
		g.Serve(l)
	}()
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
	s.rec.Record(ev)
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
func (s *Server) Recorder() *trace.Recorder { return s.rec }

// Faults are the fault rules applied to every call; change them at any time.
func (s *Server) Faults() *faults.Set { return s.faults }

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
			s.runtime.Close() // ends GetContainerEvents streams, so GracefulStop does not wait on them
		}
		if s.streaming != nil {
			s.streaming.Close() // and every exec, attach and port-forward session
		}
		for _, g := range s.grpc {
			done := make(chan struct{})
			go func() { g.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				g.Stop()
			}
		}
		s.wg.Wait()
		if s.admin != nil {
			s.admin.Close()
		}
		if s.ownRec && s.rec != nil {
			s.closeErr = s.rec.Close()
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
func (s *Server) startStreaming(addr string, into *lazyStreaming) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("streaming server: %w", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = l.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: l.Addr().String()}
	sessions := s.runtime.SessionRuntime()
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
