package trace

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCallerMetadataNamesTheCaller(t *testing.T) {
	rec, _ := New(Options{})
	ic := rec.UnaryServerInterceptor(Boundary{Interface: CSI, Caller: "kubelet", Callee: "csi-fake"})
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/GetPluginInfo"}
	h := func(ctx context.Context, req any) (any, error) { return nil, nil }
	ic(context.Background(), nil, info, h)
	ic(metadata.NewIncomingContext(context.Background(), metadata.Pairs(CallerMetadata, "external-provisioner")), nil, info, h)
	evs := rec.Events()
	if len(evs) != 2 || evs[0].Caller != "kubelet" || evs[1].Caller != "external-provisioner" {
		t.Errorf("callers %q, %q; want kubelet (the boundary's) then external-provisioner (the client's)", evs[0].Caller, evs[1].Caller)
	}
}

// Calls recorded by the interceptor and events recorded as such share one ring: they come back
// in the order they finished, the oldest dropped first, each call with its method, code, error,
// request and response, whatever the inner interceptor (fault rules) made of it.
func TestRingMixesCallsAndEvents(t *testing.T) {
	rec, _ := New(Options{Capacity: 3})
	failing := injectFunc(func(ctx context.Context, method string, req any) (string, error) {
		if method == "/runtime.v1.RuntimeService/StopPodSandbox" {
			return "stop-rule", status.Error(codes.Unavailable, "injected")
		}
		return "", nil
	})
	ic := rec.UnaryServerInterceptorWith(Boundary{Interface: CRI, Caller: "kubelet", Callee: "cri-fake"}, failing)
	h := func(ctx context.Context, req any) (any, error) {
		return &runtimeapi.VersionResponse{RuntimeName: "cri-fake"}, nil
	}
	call := func(method string) {
		ic(context.Background(), &runtimeapi.VersionRequest{Version: "v1"}, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/" + method}, h)
	}
	call("Version") // dropped: the ring holds three
	rec.Record(Event{Interface: CNI, Caller: "cri-fake", Callee: "net", Method: "ADD", Code: "OK"})
	call("Version")
	call("StopPodSandbox")
	evs := rec.Events()
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(evs), evs)
	}
	if evs[0].Method != "ADD" || evs[1].Method != "Version" || evs[2].Method != "StopPodSandbox" {
		t.Fatalf("methods %q %q %q, want ADD Version StopPodSandbox", evs[0].Method, evs[1].Method, evs[2].Method)
	}
	if !(evs[0].Seq < evs[1].Seq && evs[1].Seq < evs[2].Seq) || evs[0].Seq != 2 {
		t.Errorf("sequence numbers %d %d %d, want 2 3 4", evs[0].Seq, evs[1].Seq, evs[2].Seq)
	}
	v := evs[1]
	if v.Service != "runtime.v1.RuntimeService" || v.Code != "OK" || v.Caller != "kubelet" || v.Callee != "cri-fake" ||
		string(v.Request) != `{"version":"v1"}` || string(v.Response) != `{"runtimeName":"cri-fake"}` || v.Time.IsZero() {
		t.Errorf("Version call read back as %+v", v)
	}
	f := evs[2]
	if f.Code != "Unavailable" || f.Error != "injected" || f.Response != nil || f.Attrs[FaultAttr] != "stop-rule" {
		t.Errorf("injected fault read back as code %q error %q response %s attrs %v", f.Code, f.Error, f.Response, f.Attrs)
	}
	if v.Attrs != nil {
		t.Errorf("a call no fault touched has attrs %v", v.Attrs)
	}
	// A second read gives the same events (rendered once, kept).
	if again := rec.Events(); string(again[1].Request) != string(v.Request) || again[2].Seq != f.Seq {
		t.Errorf("second read differs: %+v", again)
	}
}

// injectFunc is an Injector written as a function.
type injectFunc func(ctx context.Context, method string, req any) (string, error)

func (f injectFunc) Inject(ctx context.Context, method string, req any) (string, error) {
	return f(ctx, method, req)
}

// A fault that only delays a call lets the handler answer; the event still names it.
func TestDelayFaultIsNamed(t *testing.T) {
	rec, _ := New(Options{})
	slow := injectFunc(func(context.Context, string, any) (string, error) { return "slow-rule", nil })
	ic := rec.UnaryServerInterceptorWith(Boundary{Interface: CRI, Caller: "kubelet", Callee: "cri-fake"}, slow)
	called := false
	h := func(context.Context, any) (any, error) { called = true; return &runtimeapi.VersionResponse{}, nil }
	if _, err := ic(context.Background(), &runtimeapi.VersionRequest{}, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/Version"}, h); err != nil || !called {
		t.Fatalf("err %v, handler called %v", err, called)
	}
	evs := rec.Events()
	if len(evs) != 1 || evs[0].Code != "OK" || evs[0].Attrs[FaultAttr] != "slow-rule" || evs[0].Seq != 1 || evs[0].Method != "Version" {
		t.Fatalf("events %+v", evs)
	}
}

// seededInjector is an Injector with a seed, as package faults' Set is.
type seededInjector struct{ injectFunc }

func (seededInjector) Seed() uint64 { return 42 }

// The event of a faulted call carries the seed of the rules that chose it, when they have one.
func TestFaultSeedIsRecorded(t *testing.T) {
	rec, _ := New(Options{})
	hit := true
	in := seededInjector{func(context.Context, string, any) (string, error) {
		if hit {
			return "coin", nil
		}
		return "", nil
	}}
	ic := rec.UnaryServerInterceptorWith(Boundary{Interface: CRI, Caller: "kubelet", Callee: "cri-fake"}, in)
	h := func(context.Context, any) (any, error) { return &runtimeapi.VersionResponse{}, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/Version"}
	ic(context.Background(), &runtimeapi.VersionRequest{}, info, h)
	hit = false
	ic(context.Background(), &runtimeapi.VersionRequest{}, info, h)
	evs := rec.Events()
	if len(evs) != 2 || evs[0].Attrs[FaultAttr] != "coin" || evs[0].Attrs[FaultSeedAttr] != "42" || evs[1].Attrs != nil {
		t.Fatalf("events %+v", evs)
	}
}
