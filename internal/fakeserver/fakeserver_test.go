package fakeserver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
)

// healthServer stands for a fake's service: Check answers or panics as the request's service
// name says; Watch panics; List blocks until its call is cut off.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	listing chan struct{} // closed when List has started
}

func (h *healthServer) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.Service == "panic" {
		var m map[string]int
		m["boom"]++ // a defect: assignment to a nil map
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *healthServer) Watch(*healthpb.HealthCheckRequest, grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	panic("stream defect")
}

func (h *healthServer) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	close(h.listing)
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// logBuffer collects log output; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve starts a scaffold serving the health service behind the trace interceptor, as the fakes
// serve theirs, and returns a client.
func serve(t *testing.T, cfg Config) (*Scaffold, healthpb.HealthClient, string) {
	t.Helper()
	sc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	dir, err := endpoint.MkdirTemp("fakeserver-", len("s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ep := endpoint.URL(filepath.Join(dir, "s.sock"))
	l, err := sc.Listen(ep)
	if err != nil {
		t.Fatal(err)
	}
	b := trace.Boundary{Interface: trace.CRI, Caller: "kubelet", Callee: "fake"}
	g := sc.NewGRPC([]grpc.UnaryServerInterceptor{sc.Recorder().UnaryServerInterceptorWith(b, sc.Faults())},
		[]grpc.StreamServerInterceptor{sc.Recorder().StreamServerInterceptor(b)})
	healthpb.RegisterHealthServer(g, &healthServer{listing: make(chan struct{})})
	sc.Serve(g, l)
	conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sc, healthpb.NewHealthClient(conn), ep
}

// A handler that panics answers Internal, the panic is logged with its stack, the trace records
// the answer, and the server goes on serving.
func TestPanicIsInternal(t *testing.T) {
	var log logBuffer
	sc, c, _ := serve(t, Config{Log: slog.New(slog.NewTextHandler(&log, nil))})
	ctx := context.Background()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "panic"})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "assignment to entry in nil map") {
		t.Fatalf("panicking unary call: %v, want Internal naming the panic", err)
	}
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "stream defect") {
		t.Fatalf("panicking stream: %v, want Internal", err)
	}
	if resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("after the panics: %v, %v", resp, err)
	}
	l := log.String()
	for _, want := range []string{"level=ERROR", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch", "fakeserver_test.go"} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
	var codesSeen []string
	for _, ev := range sc.Recorder().Events() {
		codesSeen = append(codesSeen, ev.Method+":"+ev.Code)
	}
	if got := strings.Join(codesSeen, " "); got != "Check:Internal Watch:Internal Check:OK" {
		t.Errorf("trace %s, want Check:Internal Watch:Internal Check:OK", got)
	}
}

// A request over the limit is refused with ResourceExhausted before the server reads it; one
// within it is served.
func TestMessageSizeLimit(t *testing.T) {
	_, c, _ := serve(t, Config{MaxMsgSize: 64 << 10})
	ctx := context.Background()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 65<<10)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: %v, want ResourceExhausted", err)
	}
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 60<<10)}); err != nil {
		t.Fatalf("request within the limit: %v", err)
	}
}

func TestSocketModes(t *testing.T) {
	mode := func(t *testing.T, ep string) (os.FileMode, uint32) {
		t.Helper()
		p, _ := endpoint.Parse(ep)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid
	}
	t.Run("defaults", func(t *testing.T) {
		sc, _, ep := serve(t, Config{})
		adm, err := sc.ServeAdmin(endpoint.URL(filepath.Join(t.TempDir(), "admin.sock")))
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := mode(t, ep); m != 0o660 {
			t.Errorf("socket mode %v, want 0660", m)
		}
		if m, _ := mode(t, adm); m != 0o600 {
			t.Errorf("admin socket mode %v, want 0600", m)
		}
	})
	t.Run("asked", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("changing a socket's group to one the user is not in needs root")
		}
		sc, _, ep := serve(t, Config{SocketMode: 0o600, AdminSocketMode: 0o660, SocketGroup: "4242"})
		adm, err := sc.ServeAdmin(endpoint.URL(filepath.Join(t.TempDir(), "admin.sock")))
		if err != nil {
			t.Fatal(err)
		}
		if m, gid := mode(t, ep); m != 0o600 || gid != 4242 {
			t.Errorf("socket mode %v group %d, want 0600 4242", m, gid)
		}
		if m, gid := mode(t, adm); m != 0o660 || gid != 4242 {
			t.Errorf("admin socket mode %v group %d, want 0660 4242", m, gid)
		}
		// The admin API answers on its socket.
		ac, err := admin.NewClient(adm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Faults(); err != nil {
			t.Errorf("admin API: %v", err)
		}
	})
	if _, err := New(Config{SocketGroup: "no-such-group-plugsim"}); err == nil {
		t.Error("an unknown socket group was accepted")
	}
}

// The seed: the option's wins over the file's, the file's over a random one; the random one is
// never 0 and is logged, and a faulted call's trace event records it.
func TestFaultSeed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.yaml")
	if err := os.WriteFile(file, []byte("seed: 9\nrules:\n- {method: Check, code: Unavailable, probability: 0.999999}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	methods := []string{"/grpc.health.v1.Health/Check"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want uint64 // 0: random
	}{
		{"option over file", Config{FaultsFile: file, FaultSeed: 5}, 5},
		{"file", Config{FaultsFile: file}, 9},
		{"option", Config{FaultSeed: 5}, 5},
		{"random", Config{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log logBuffer
			tc.cfg.Methods, tc.cfg.Log = methods, slog.New(slog.NewTextHandler(&log, nil))
			sc, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			seed := sc.Faults().Seed()
			if (tc.want != 0 && seed != tc.want) || seed == 0 {
				t.Fatalf("seed %d, want %d (0: any but 0)", seed, tc.want)
			}
			if !strings.Contains(log.String(), "seed="+strconv.FormatUint(seed, 10)) {
				t.Errorf("seed %d not logged:\n%s", seed, log.String())
			}
		})
	}
	sc, c, _ := serve(t, Config{FaultsFile: file, FaultSeed: 5, Methods: methods})
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("faulted call: %v", err)
	}
	evs := sc.Recorder().Events()
	if len(evs) != 1 || evs[0].Attrs[trace.FaultAttr] != "rule-1" || evs[0].Attrs[trace.FaultSeedAttr] != "5" {
		t.Fatalf("trace %+v, want one event naming rule-1 and seed 5", evs)
	}
	// A set given in the options keeps its seed.
	own := faults.NewSet(77)
	if sc, err := New(Config{Faults: own, FaultSeed: 5}); err != nil || sc.Faults() != own || sc.Faults().Seed() != 77 {
		t.Fatalf("given set: %v", err)
	}
	if _, err := New(Config{FaultsFile: filepath.Join(t.TempDir(), "missing.yaml")}); err == nil {
		t.Fatal("a missing faults file was accepted")
	}
}

// Close lets a call in flight run for the grace period, then cuts it off: it returns, and the
// handler sees its context end.
func TestCloseCutsOffAStuckCall(t *testing.T) {
	sc, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ep := endpoint.URL(filepath.Join(dir, "s.sock"))
	l, err := sc.Listen(ep)
	if err != nil {
		t.Fatal(err)
	}
	h := &healthServer{listing: make(chan struct{})}
	g := sc.NewGRPC(nil, nil)
	healthpb.RegisterHealthServer(g, h)
	sc.Serve(g, l)
	conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() {
		_, err := healthpb.NewHealthClient(conn).List(context.Background(), &healthpb.HealthListRequest{})
		done <- err
	}()
	<-h.listing
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Fatalf("the stuck call ended with %v, want Unavailable or Canceled", err)
	}
}

func TestModeFlag(t *testing.T) {
	var m os.FileMode
	v := modeValue{&m}
	if err := v.Set("0640"); err != nil || m != 0o640 || v.String() != "0640" {
		t.Fatalf("Set(0640): %v, mode %v, String %q", err, m, v.String())
	}
	for _, bad := range []string{"", "rw-r-----", "0", "1777", "0800", "-1"} {
		if err := v.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

func TestLogfLogger(t *testing.T) {
	var lines []string
	log := LogfLogger(func(format string, args ...any) {
		lines = append(lines, strings.TrimSpace(fmt.Sprintf(format, args...)))
	})
	log.Info("fault rules", "seed", 3)
	if len(lines) != 1 || lines[0] != `level=INFO msg="fault rules" seed=3` {
		t.Fatalf("lines %q", lines)
	}
	var out logBuffer
	Logf(slog.New(slog.NewTextHandler(&out, nil)))("restore %s: %d", "x", 2)
	if !strings.Contains(out.String(), `level=INFO msg="restore x: 2"`) {
		t.Fatalf("Logf wrote %q", out.String())
	}
}
