// Package fakeserver is the serving scaffold cri-fake's and csi-fake's servers share: the trace
// recorder and the fault rules (with the seed that makes probabilistic rules repeatable), gRPC
// servers with the message size limits and the panic recovery a kubelet-facing plugin needs, unix
// sockets with the mode and group asked for, the admin API, structured logging, and a close that
// lets in-flight calls finish for a bounded time.
//
// What each fake serves (its services, its interceptors' trace boundaries, its own state) stays in
// its server package; this package holds only what both would otherwise write twice.
package fakeserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/user"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
)

// Default socket modes. The fakes' sockets are 0660, as containerd's and the CSI drivers' are: the
// owner and the group (--socket-group) may call, nobody else. The admin socket can change what the
// fake does (fault rules), so it is its owner's only unless asked otherwise.
const (
	DefaultSocketMode      os.FileMode = 0o660
	DefaultAdminSocketMode os.FileMode = 0o600
)

// CRIMaxMsgSize is the message size limit of the CRI sockets, both ways: containerd's default
// (defaults.DefaultMaxRecvMsgSize and DefaultMaxSendMsgSize, 16 << 20,
// https://github.com/containerd/containerd/blob/main/defaults/defaults.go), which is also what
// the kubelet's CRI client accepts (k8s.io/cri-client/pkg/utils.go, maxMsgSize).
const CRIMaxMsgSize = 16 << 20

// CSIMaxMsgSize is the message size limit of the CSI sockets, both ways: grpc-go's default
// receive limit, which the kubelet's CSI client and the kubernetes-csi sidecars keep (they set
// none), as csi-driver-host-path's server does. An answer above it would fail in the client; the
// server failing it instead puts the ResourceExhausted in csi-fake's trace.
const CSIMaxMsgSize = 4 << 20

// stopGrace bounds how long Close waits for in-flight calls before it cuts them off.
const stopGrace = 2 * time.Second

// Config is what a fake's options say about serving.
type Config struct {
	// Methods are the full names of the methods served, which fault rules may name.
	Methods []string

	// Recorder records the trace; nil means a new one of TraceCapacity events appending to
	// TraceFile. A given Recorder is used as it is (and not closed by Close).
	Recorder      *trace.Recorder
	TraceFile     string
	TraceCapacity int

	// Faults are the fault rules; nil means a new set holding FaultsFile's rules, if set, seeded
	// by FaultSeed, else by the file's seed, else by a fresh random seed. The seed is logged, and
	// the trace event of every call a rule faulted records it (attrs.faultSeed), so a run can be
	// repeated with FaultSeed set to it. A given set keeps its own seed.
	Faults     *faults.Set
	FaultsFile string
	FaultSeed  uint64

	// SocketMode is the mode of the sockets Listen makes (0: DefaultSocketMode); AdminSocketMode
	// that of the admin socket (0: DefaultAdminSocketMode). SocketGroup, a group name or number,
	// owns both; empty leaves the group the process's.
	SocketMode      os.FileMode
	AdminSocketMode os.FileMode
	SocketGroup     string

	// MaxMsgSize limits the messages received and sent on each call (CRIMaxMsgSize,
	// CSIMaxMsgSize); a larger request is answered ResourceExhausted before it is read.
	MaxMsgSize int

	// Log receives the scaffold's messages, a recovered panic among them; nil discards them.
	Log *slog.Logger

	// Encode, when set, encodes the answers it knows (false: the others) in place of protobuf-go,
	// for speed, in chunks gRPC lets go of as it sends them; what it writes, joined, must decode to
	// the same message (cri-fake's listings).
	Encode func(answer any) ([][]byte, bool)
}

// Scaffold is the serving half of a running fake.
type Scaffold struct {
	log        *slog.Logger
	rec        *trace.Recorder
	ownRec     bool
	faults     *faults.Set
	sockMode   os.FileMode
	adminMode  os.FileMode
	gid        int // -1: leave the group
	maxMsgSize int
	encode     func(any) ([][]byte, bool)

	mu    sync.Mutex
	grpcs []*grpc.Server
	admin *http.Server
	wg    sync.WaitGroup
}

// New makes the recorder and the fault rules. Close releases what it made.
func New(cfg Config) (*Scaffold, error) {
	s := &Scaffold{
		log:        cmp.Or(cfg.Log, slog.New(slog.DiscardHandler)),
		sockMode:   cmp.Or(cfg.SocketMode, DefaultSocketMode),
		adminMode:  cmp.Or(cfg.AdminSocketMode, DefaultAdminSocketMode),
		gid:        -1,
		maxMsgSize: cmp.Or(cfg.MaxMsgSize, CRIMaxMsgSize),
		encode:     cfg.Encode,
	}
	if cfg.SocketGroup != "" {
		gid, err := lookupGroup(cfg.SocketGroup)
		if err != nil {
			return nil, err
		}
		s.gid = gid
	}
	s.faults = cfg.Faults
	if s.faults == nil {
		var f faults.File
		if cfg.FaultsFile != "" {
			var err error
			if f, err = faults.ReadFile(cfg.FaultsFile); err != nil {
				return nil, err
			}
		}
		seed := cmp.Or(cfg.FaultSeed, f.Seed, newSeed())
		// The set knows the methods served, so a rule naming another one is refused.
		fs, err := faults.NewSetOf(f, seed, cfg.FaultsFile, faults.WithMethods(cfg.Methods...), faults.WithGRPCCodes())
		if err != nil {
			return nil, err
		}
		s.faults = fs
	}
	s.log.Info("fault rules", "seed", s.faults.Seed(), "rules", len(s.faults.Rules()), "file", cfg.FaultsFile)
	s.rec = cfg.Recorder
	if s.rec == nil {
		r, err := trace.New(trace.Options{Capacity: cfg.TraceCapacity, File: cfg.TraceFile})
		if err != nil {
			return nil, err
		}
		s.rec, s.ownRec = r, true
	}
	return s, nil
}

// newSeed returns a random seed other than 0 (which a --faults file and FaultSeed use for "none").
func newSeed() uint64 {
	for {
		if n := rand.Uint64(); n != 0 {
			return n
		}
	}
}

func lookupGroup(name string) (int, error) {
	if gid, err := strconv.Atoi(name); err == nil {
		return gid, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("socket group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// Recorder is the trace.
func (s *Scaffold) Recorder() *trace.Recorder { return s.rec }

// Faults are the fault rules.
func (s *Scaffold) Faults() *faults.Set { return s.faults }

// Log is the logger (a discarding one when none was configured).
func (s *Scaffold) Log() *slog.Logger { return s.log }

// NewGRPC returns a gRPC server whose calls go through the unary interceptors (the fake's trace and
// fault rules) or the stream ones, in that order, and then through the panic recovery:
// a handler that panics answers codes.Internal, logged with its stack, and the trace records that
// answer, instead of taking the process (and every test sharing it) down. Messages are limited to
// MaxMsgSize both ways.
func (s *Scaffold) NewGRPC(unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) *grpc.Server {
	return grpc.NewServer(
		grpc.ChainUnaryInterceptor(append(slices.Clip(unary), s.recoverUnary)...),
		grpc.ChainStreamInterceptor(append(slices.Clip(stream), s.recoverStream)...),
		grpc.MaxRecvMsgSize(s.maxMsgSize), grpc.MaxSendMsgSize(s.maxMsgSize),
		// gRPC's protobuf codec but for the buffers of answers over 1 MiB (codec.go).
		grpc.ForceServerCodecV2(wireCodec{encode: s.encode}),
		// Calls run on a few long-lived worker goroutines instead of a new goroutine per call,
		// whose stack would grow (and be copied) through the interceptors and the handler on
		// every call: about a tenth of a kubelet-style pod lifecycle over the socket (cri-fake's
		// BenchmarkPodLifecycle, A/B interleaved). When every worker is busy (a
		// GetContainerEvents stream holds one for its whole life), gRPC starts a goroutine for
		// the call as it does without workers.
		grpc.NumStreamWorkers(uint32(max(4, goruntime.GOMAXPROCS(0)))),
	)
}

func (s *Scaffold) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (_ any, err error) {
	defer s.recovered(info.FullMethod, &err)
	return h(ctx, req)
}

func (s *Scaffold) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer s.recovered(info.FullMethod, &err)
	return h(srv, ss)
}

// recovered turns a panic of the handler of method into an Internal answer in *err.
func (s *Scaffold) recovered(method string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	s.log.Error("handler panicked; answering Internal", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	*err = status.Errorf(codes.Internal, "%s: the fake panicked (a defect of the fake, logged): %v", method, r)
}

// Listen listens on a unix endpoint with the configured mode and group.
func (s *Scaffold) Listen(ep string) (net.Listener, error) {
	return s.listen(ep, s.sockMode)
}

func (s *Scaffold) listen(ep string, mode os.FileMode) (net.Listener, error) {
	l, err := endpoint.ListenMode(ep, mode)
	if err != nil {
		return nil, err
	}
	if s.gid >= 0 {
		path := l.Addr().String()
		if err := os.Lchown(path, -1, s.gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("socket group of %s: %w", path, err)
		}
	}
	return l, nil
}

// Serve serves g on l until Close; each connection is named after the process that made it (the
// kubelet, crictl, a CSI sidecar), which is what the trace records as the caller
// (trace.PeerListener).
func (s *Scaffold) Serve(g *grpc.Server, l net.Listener) {
	s.mu.Lock()
	s.grpcs = append(s.grpcs, g)
	s.mu.Unlock()
	s.wg.Add(1)
	l = trace.PeerListener(l)
	go func() {
		defer s.wg.Done()
		g.Serve(l)
	}()
}

// ServeAdmin serves the admin API (package admin: the trace and the fault rules) on a unix
// endpoint with the admin socket's mode and the sockets' group, and returns its unix:// URL.
func (s *Scaffold) ServeAdmin(ep string) (string, error) {
	l, err := s.listen(ep, s.adminMode)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: admin.Handler(s.rec, s.faults), ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.admin = srv
	s.mu.Unlock()
	go srv.Serve(l)
	return endpoint.URL(l.Addr().String()), nil
}

// Close stops the gRPC servers (in-flight calls get stopGrace to finish, then are cut off) and the
// admin API, and closes the trace file of a recorder it made. A fake ends its own long-lived
// streams first, or they hold the grace period up.
func (s *Scaffold) Close() error {
	s.mu.Lock()
	grpcs, adm := s.grpcs, s.admin
	s.grpcs, s.admin = nil, nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, g := range grpcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() { g.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(stopGrace):
				g.Stop()
			}
		}()
	}
	wg.Wait()
	s.wg.Wait()
	var err error
	if adm != nil {
		err = adm.Close()
	}
	if s.ownRec {
		err = errors.Join(err, s.rec.Close())
	}
	return err
}
