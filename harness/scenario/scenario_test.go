package scenario

import (
	"bytes"
	"context"
	"encoding/xml"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

func TestParseErrorsPointAtLineAndField(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"unknown top-level field", "name: x\nstepz: []\n", 2, "stepz: unknown field"},
		{"no steps", "name: x\n", 1, "steps: want a non-empty list"},
		{"unknown interface", "steps:\n  - interface: cri2\n    call: Version\n", 2, `unknown interface "cri2"`},
		{"unknown method", "steps:\n  - interface: cri\n    call: RunPodSandboxx\n", 2, `has no method "RunPodSandboxx"`},
		{"misspelt request field", "steps:\n  - interface: cri\n    call: RunPodSandbox\n    request:\n      config:\n        metadata:\n          nam: web\n", 7,
			`steps[0].request.config.metadata.nam: runtime.v1.PodSandboxMetadata has no field "nam"`},
		{"bad enum", "steps:\n  - interface: cri\n    call: ListContainers\n    request:\n      filter:\n        state:\n          state: RUNNING\n", 7,
			`"RUNNING" is not a ContainerState`},
		{"integer expected", "steps:\n  - interface: cri\n    call: StopContainer\n    request:\n      timeout: soon\n", 5, "want an integer"},
		{"bad code", "steps:\n  - interface: cri\n    call: Version\n    expect:\n      code: NotFund\n", 5, `"NotFund" is not a gRPC code`},
		{"bad expectation path", "steps:\n  - interface: cri\n    call: Version\n    expect:\n      fields:\n        runtimeNam: x\n", 6,
			`runtime.v1.VersionResponse has no field "runtimeNam"`},
		{"list needs a selector", "steps:\n  - interface: cri\n    call: Status\n    expect:\n      fields:\n        status.conditions.status: true\n", 6,
			"select an element"},
		{"bad capture path", "steps:\n  - interface: cri\n    call: RunPodSandbox\n    capture:\n      id: podSandboxID\n", 5, `no field "podSandboxID"`},
		{"fault without target", "steps:\n  - interface: fault\n    call: Add\n    rules: {method: X, code: NotFound}\n", 2, "target: missing"},
		{"bad fault rule", "steps:\n  - interface: fault\n    call: Add\n    target: cri\n    rules: {method: StopContainer}\n", 5, "give a code, a delay, or both"},
		{"bad cni verb", "steps:\n  - interface: cni\n    call: PUT\n", 2, `CNI verb "PUT"`},
		{"yaml syntax", "name: x\nsteps:\n  - interface: cri\n    call: [x\n", 3, "did not find expected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "s.yaml")
			if err == nil {
				t.Fatalf("parsed without error, want %q", tc.want)
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %T %v is not a *scenario.Error", err, err)
			}
			if e.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q (line %d), want line %d and %q", err, e.Line, tc.line, tc.want)
			}
		})
	}
}

// criServer is a tiny runtime for the runner's tests: sandboxes that exist or not, and a status.
type criServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu        sync.Mutex
	sandboxes map[string]string // id → name
	statusN   int
}

func (s *criServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "test", RuntimeApiVersion: "v1"}, nil
}

func (s *criServer) RunPodSandbox(_ context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "sb-" + r.GetConfig().GetMetadata().GetName()
	s.sandboxes[id] = r.GetConfig().GetMetadata().GetName()
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (s *criServer) PodSandboxStatus(_ context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, ok := s.sandboxes[r.PodSandboxId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sandbox %q not found", r.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
		Id: r.PodSandboxId, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name},
		Labels:   map[string]string{"app": name},
	}}, nil
}

// Status reports NetworkReady only from the third call on, for the wait test.
func (s *criServer) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statusN++
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: "RuntimeReady", Status: true},
		{Type: "NetworkReady", Status: s.statusN >= 3},
	}}}, nil
}

func (s *criServer) StopContainer(context.Context, *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, nil
}

type faultSet struct{ *faults.Set }

func (f faultSet) AddFaults(r ...faults.Rule) ([]string, error) { return f.Add(r...) }
func (f faultSet) ClearFaults() error                           { f.Reset(); return nil }

// startCRI serves criServer with the fakes' trace and fault interceptors on a temp socket.
func startCRI(t testing.TB) (*Env, *trace.Recorder) {
	t.Helper()
	rec, err := trace.New(trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := faults.NewSet(1)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		rec.UnaryServerInterceptor(trace.Boundary{Interface: trace.CRI, Caller: "kubelet", Callee: "test-runtime"}),
		fs.UnaryServerInterceptor()))
	runtimeapi.RegisterRuntimeServiceServer(srv, &criServer{sandboxes: map[string]string{}})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	cc, err := call.Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &Env{
		CRI:    cc,
		Faults: map[string]FaultTarget{CRI: faultSet{fs}},
		Trace:  &collect.Collector{Sources: []collect.Source{collect.Recorder("test-runtime", rec)}},
	}, rec
}

const passing = `name: sandbox round trip
steps:
  - name: make a sandbox
    interface: cri
    call: RunPodSandbox
    request:
      config:
        metadata: {name: web, namespace: default, uid: "${run}"}
    capture:
      sandbox: podSandboxId
  - interface: cri
    call: PodSandboxStatus
    request: {pod_sandbox_id: "${sandbox}"}
    expect:
      fields:
        status.id: ${sandbox}
        status.state: SANDBOX_READY
        status.labels.app: web
        status.metadata.name: {matches: "^w.b$"}
        status.network: {exists: false}
  - name: the network becomes ready
    interface: cri
    call: Status
    wait: {timeout: 5s, interval: 10ms}
    expect:
      fields:
        status.conditions[type=NetworkReady].status: true
        status.conditions: {len: 2}
  - name: a sandbox that does not exist
    interface: cri
    call: PodSandboxStatus
    request: {podSandboxId: nope}
    expect: {code: NotFound, error: "not found"}
  - interface: fault
    call: Add
    target: cri
    rules: {method: StopContainer, code: Unavailable, message: "injected for ${sandbox}", times: 1}
  - name: the first stop fails
    interface: cri
    call: StopContainer
    request: {containerId: c1}
    expect: {code: Unavailable, error: "injected for sb-web"}
  - name: the kubelet retries
    interface: cri
    call: StopContainer
    request: {containerId: c1}
`

func TestRunPassesAndRecordsTheBoundary(t *testing.T) {
	env, _ := startCRI(t)
	sc, err := Parse([]byte(passing), "pass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	env.Out = &out
	res := Run(context.Background(), sc, env)
	if !res.Passed {
		t.Fatalf("scenario failed: %s\n%s", res.Failure, out.String())
	}
	for _, want := range []string{
		"kubelet ──CRI──▶ test-runtime  RunPodSandbox",
		"kubelet ──CRI──▶ test-runtime  StopContainer",
		"✗ Unavailable: injected for sb-web",
		"PASS sandbox round trip",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// Status was called until NetworkReady (3 times); every call is in that step's events.
	if n := len(res.Steps[2].Events); n != 3 {
		t.Errorf("wait step recorded %d calls, want 3", n)
	}
}

func TestRunFailureNamesStepAndLine(t *testing.T) {
	env, _ := startCRI(t)
	bad := strings.Replace(passing, "status.labels.app: web", "status.labels.app: db", 1)
	sc, err := Parse([]byte(bad), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := Run(context.Background(), sc, env)
	if res.Passed {
		t.Fatal("a wrong expectation passed")
	}
	for _, want := range []string{"bad.yaml:11:", "step 2", "PodSandboxStatus", "line 18: expected status.labels.app equals db, got web"} {
		if !strings.Contains(res.Failure, want) {
			t.Errorf("failure %q lacks %q", res.Failure, want)
		}
	}
	if !res.Steps[3].Skipped {
		t.Error("steps after a failure should be skipped")
	}
	var x bytes.Buffer
	if err := WriteJUnit(&x, []*Result{res}); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(x.Bytes(), &doc); err != nil {
		t.Fatalf("junit is not XML: %v\n%s", err, x.String())
	}
	if doc.Tests != 7 || doc.Failures != 1 || doc.Skipped != 5 {
		t.Errorf("junit counts tests=%d failures=%d skipped=%d, want 7/1/5", doc.Tests, doc.Failures, doc.Skipped)
	}
}

func TestUnsetVariableIsReported(t *testing.T) {
	env, _ := startCRI(t)
	sc, err := Parse([]byte("steps:\n  - interface: cri\n    call: PodSandboxStatus\n    request: {podSandboxId: \"${nothing}\"}\n"), "v.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := Run(context.Background(), sc, env)
	if res.Passed || !strings.Contains(res.Failure, "${nothing} is not set") {
		t.Errorf("failure = %q, want the unset variable named", res.Failure)
	}
}
