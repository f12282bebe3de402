package faults

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

func TestCheckMatching(t *testing.T) {
	pull := &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/nginx:1.27"}}
	run := &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default"},
		Labels:   map[string]string{"app": "shop"},
	}}
	for _, tc := range []struct {
		name   string
		rule   Rule
		method string
		req    any
		hit    bool
	}{
		{"method name", Rule{Method: "PullImage", Code: "Unavailable"}, "/runtime.v1.ImageService/PullImage", pull, true},
		{"full method", Rule{Method: "/runtime.v1.ImageService/PullImage", Code: "Unavailable"}, "/runtime.v1.ImageService/PullImage", pull, true},
		{"other method", Rule{Method: "RemoveImage", Code: "Unavailable"}, "/runtime.v1.ImageService/PullImage", pull, false},
		{"wildcard", Rule{Method: "*", Delay: Duration(time.Millisecond)}, "/runtime.v1.ImageService/PullImage", pull, true},
		{"field glob", Rule{Method: "PullImage", Match: map[string]string{"image.image": "*nginx*"}, Code: "NotFound"}, "/runtime.v1.ImageService/PullImage", pull, true},
		{"field mismatch", Rule{Method: "PullImage", Match: map[string]string{"image.image": "busybox*"}, Code: "NotFound"}, "/runtime.v1.ImageService/PullImage", pull, false},
		{"json field name", Rule{Method: "RunPodSandbox", Match: map[string]string{"config.metadata.name": "web"}, Code: "Internal"}, "RunPodSandbox", run, true},
		{"map entry", Rule{Method: "RunPodSandbox", Match: map[string]string{"config.labels.app": "shop"}, Code: "Internal"}, "RunPodSandbox", run, true},
		{"missing field", Rule{Method: "RunPodSandbox", Match: map[string]string{"config.nothing": "x"}, Code: "Internal"}, "RunPodSandbox", run, false},
		{"cni verb any case", Rule{Method: "add", Code: "11"}, "ADD", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSet(1)
			if _, err := s.Add(tc.rule); err != nil {
				t.Fatal(err)
			}
			var fields Fields
			switch r := tc.req.(type) {
			case *runtimeapi.PullImageRequest:
				fields = ProtoFields(r)
			case *runtimeapi.RunPodSandboxRequest:
				fields = ProtoFields(r)
			}
			if _, hit := s.Check(tc.method, fields); hit != tc.hit {
				t.Fatalf("hit = %v, want %v", hit, tc.hit)
			}
		})
	}
}

// A rule limited by Times stays in Rules once used up, so its hits can be asserted.
func TestTimesKeepsTheCounts(t *testing.T) {
	s := NewSet(7)
	s.Add(Rule{ID: "twice", Method: "StopContainer", Code: "DeadlineExceeded", Times: 2})
	for i, want := range []bool{true, true, false} {
		if _, hit := s.Check("StopContainer", nil); hit != want {
			t.Fatalf("call %d: hit = %v, want %v", i, hit, want)
		}
	}
	rs := s.Rules()
	if len(rs) != 1 || rs[0].Hits != 2 || rs[0].Matched != 2 || !rs[0].UsedUp() {
		t.Fatalf("rules after use: %+v", rs)
	}
	if r, ok := s.Rule("twice"); !ok || r.Hits != 2 {
		t.Fatalf("Rule(twice) = %+v, %v", r, ok)
	}
}

// cri-fake's set knows its methods: a misspelt one is refused with the names it could have been.
func TestMethodsOfTheFake(t *testing.T) {
	s := NewSet(0, WithMethods(MethodsOf(&runtimeapi.RuntimeService_ServiceDesc, &runtimeapi.ImageService_ServiceDesc)...), WithGRPCCodes())
	_, err := s.Add(Rule{Method: "PullImag", Code: "Unavailable"})
	if err == nil || !strings.Contains(err.Error(), "did you mean PullImage?") || !strings.Contains(err.Error(), "RunPodSandbox") {
		t.Fatalf("misspelt method: err = %v", err)
	}
	for _, m := range []string{"PullImage", "GetContainerEvents", "/runtime.v1.RuntimeService/RunPodSandbox", "*"} {
		if _, err := s.Add(Rule{Method: m, Code: "Unavailable"}); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	if _, err := s.Add(Rule{Method: "PullImage", Code: "11"}); err == nil {
		t.Error("a CNI code accepted by a gRPC fake")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "faults.yaml")
	os.WriteFile(file, []byte("rules:\n- method: PullImage\n  code: Unavailable\n- method: RunPodSandbx\n  code: Internal\n"), 0o644)
	if _, err := Load(file, WithMethods(MethodsOf(&runtimeapi.RuntimeService_ServiceDesc)...)); err == nil ||
		!strings.Contains(err.Error(), file+": rules[0]") {
		t.Fatalf("Load with an ImageService rule into a RuntimeService-only set: %v", err)
	}
	if _, err := Load(file, WithMethods(MethodsOf(&runtimeapi.RuntimeService_ServiceDesc, &runtimeapi.ImageService_ServiceDesc)...)); err == nil ||
		!strings.Contains(err.Error(), file+": rules[1]") || !strings.Contains(err.Error(), "did you mean RunPodSandbox?") {
		t.Fatalf("Load with a misspelt method: %v", err)
	}
}

func TestProbability(t *testing.T) {
	s := NewSet(7)
	s.Add(Rule{Method: "Version", Code: "Unavailable", Probability: 0.5})
	hits := 0
	for i := 0; i < 1000; i++ {
		if _, hit := s.Check("Version", nil); hit {
			hits++
		}
	}
	if hits < 400 || hits > 600 {
		t.Fatalf("probability 0.5 hit %d of 1000", hits)
	}
	if s.Rules()[0].Hits != hits {
		t.Fatalf("hit count %d, want %d", s.Rules()[0].Hits, hits)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Code: "NotFound"}, "method is required"},
		{Rule{Method: "X"}, "give a code, a delay, or both"},
		{Rule{Method: "X", Code: "Nope"}, "neither a gRPC code name"},
		{Rule{Method: "X", Code: "NotFound", Probability: 2}, "outside [0,1]"},
		{Rule{Method: "X", Code: "NotFound", Times: -1}, "negative"},
		{Rule{Method: "X", Code: "NotFound", Match: map[string]string{"a": "["}}, "bad pattern"},
	} {
		if err := tc.rule.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.rule, err, tc.want)
		}
	}
	s := NewSet(0)
	if _, err := s.Add(Rule{ID: "a", Method: "X", Code: "NotFound"}, Rule{ID: "a", Method: "Y", Code: "NotFound"}); err == nil {
		t.Fatal("duplicate IDs accepted")
	}
}

func TestParseFile(t *testing.T) {
	f, err := ParseFile([]byte("seed: 3\nrules:\n- method: PullImage\n  code: Unavailable\n  delay: 150ms\n  times: 1\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Seed != 3 || len(f.Rules) != 1 || time.Duration(f.Rules[0].Delay) != 150*time.Millisecond {
		t.Fatalf("parsed %+v", f)
	}
	if _, err := ParseFile([]byte("rules:\n- method: X\n  cod: NotFound\n"), "f.yaml"); err == nil || !strings.Contains(err.Error(), "f.yaml") {
		t.Fatalf("unknown key: err = %v", err)
	}
	if _, err := ParseFile([]byte("rules:\n- method: X\n  delay: soon\n"), "f.yaml"); err == nil {
		t.Fatal("bad delay accepted")
	}
}

// NewSetOf seeds the set with the seed it is given, not the file's (a --fault-seed flag wins), and
// the same seed makes the probabilistic rules hit the same calls.
func TestNewSetOfSeed(t *testing.T) {
	f, err := ParseFile([]byte("seed: 3\nrules:\n- method: Version\n  code: Unavailable\n  probability: 0.5\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hits := func(s *Set) string {
		var b strings.Builder
		for range 64 {
			_, ok := s.Check("/runtime.v1.RuntimeService/Version", nil)
			b.WriteString(map[bool]string{true: "x", false: "."}[ok])
		}
		return b.String()
	}
	a, err := NewSetOf(f, 42, "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSetOf(f, 42, "f.yaml")
	c, _ := NewSetOf(f, f.Seed, "f.yaml")
	if a.Seed() != 42 || c.Seed() != 3 || len(a.Rules()) != 1 {
		t.Fatalf("seeds %d, %d; rules %v", a.Seed(), c.Seed(), a.Rules())
	}
	ha, hb, hc := hits(a), hits(b), hits(c)
	if ha != hb || ha == hc || !strings.Contains(ha, "x") || !strings.Contains(ha, ".") {
		t.Fatalf("seed 42 twice: %s and %s; seed 3: %s", ha, hb, hc)
	}
	if _, err := NewSetOf(File{Rules: []Rule{{Method: "X", Code: "NoSuchCode"}}}, 1, "bad.yaml", WithGRPCCodes()); err == nil || !strings.Contains(err.Error(), "bad.yaml: rules[0]") {
		t.Fatalf("invalid rule: %v", err)
	}
	var nilSet *Set
	if nilSet.Seed() != 0 {
		t.Fatal("nil set has a seed")
	}
}

func TestUnaryInterceptor(t *testing.T) {
	s := NewSet(0)
	s.Add(Rule{Method: "Version", Code: "Unavailable", Message: "runtime is down", Times: 1})
	s.Add(Rule{Method: "Status", Delay: Duration(time.Hour)})
	icpt := s.UnaryServerInterceptor()
	called := 0
	h := func(context.Context, any) (any, error) { called++; return "ok", nil }
	_, err := icpt(context.Background(), &runtimeapi.VersionRequest{}, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/Version"}, h)
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "runtime is down" || called != 0 {
		t.Fatalf("err = %v, called = %d", err, called)
	}
	if _, err := icpt(context.Background(), &runtimeapi.VersionRequest{}, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/Version"}, h); err != nil || called != 1 {
		t.Fatalf("second call: err = %v, called = %d", err, called)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = icpt(ctx, &runtimeapi.StatusRequest{}, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/Status"}, h)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("delayed call past its deadline: err = %v", err)
	}
	if err := (Fault{Delay: time.Hour}).Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v", err)
	}
}

// Inject names the rule it applied, for the trace; its error is the status the client gets and
// names the rule too.
func TestInjectNamesTheRule(t *testing.T) {
	s := NewSet(0)
	if f, err := s.Inject(context.Background(), "/runtime.v1.RuntimeService/Version", &runtimeapi.VersionRequest{}); f != "" || err != nil {
		t.Fatalf("no rules: %q, %v", f, err)
	}
	s.Add(Rule{ID: "down", Method: "Version", Code: "Unavailable", Message: "runtime is down", Times: 1},
		Rule{ID: "slow", Method: "Version", Delay: Duration(time.Millisecond)})
	f, err := s.Inject(context.Background(), "/runtime.v1.RuntimeService/Version", &runtimeapi.VersionRequest{})
	var ie *InjectedError
	if f != "down" || status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "runtime is down" || !errors.As(err, &ie) || ie.InjectedFault() != "down" {
		t.Fatalf("first call: %q, %v", f, err)
	}
	if f, err := s.Inject(context.Background(), "/runtime.v1.RuntimeService/Version", &runtimeapi.VersionRequest{}); f != "slow" || err != nil {
		t.Fatalf("second call (delay only): %q, %v", f, err)
	}
	var nilSet *Set
	if f, err := nilSet.Inject(context.Background(), "/x/Y", nil); f != "" || err != nil || nilSet.Rules() != nil {
		t.Fatal("a nil set injects")
	}
}

// Issue 24, 2: a silent rule per guess ("after" so large it never fires) and its matched count read
// back recovered a `crictl pull --creds` password and a CSI secret. Rules see the request as the trace
// shows it: a secret reads as trace.Redacted, so no guess ever matches and the counts say nothing,
// while the fields the trace shows still match.
func TestRulesCannotObserveRedactedFields(t *testing.T) {
	pull := &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "registry.example/app:1"},
		Auth:  &runtimeapi.AuthConfig{Username: "alice", Password: "s3cret", Auth: "YWxpY2U6czNjcmV0", RegistryToken: "tok"},
	}
	create := &csi.CreateVolumeRequest{Name: "pvc-1", Secrets: map[string]string{"key": "v4lue"}}
	s := NewSet(1)
	var ids []string
	for _, r := range []Rule{
		{Method: "PullImage", Match: map[string]string{"auth.password": "s*"}, After: 1_000_000_000, Code: "Unavailable"},
		{Method: "PullImage", Match: map[string]string{"auth.password": "s3cret"}, After: 1_000_000_000, Code: "Unavailable"},
		{Method: "PullImage", Match: map[string]string{"auth.auth": "Y*"}, After: 1_000_000_000, Code: "Unavailable"},
		{Method: "PullImage", Match: map[string]string{"auth.registry_token": "t*"}, After: 1_000_000_000, Code: "Unavailable"},
		{Method: "CreateVolume", Match: map[string]string{"secrets.key": "v*"}, After: 1_000_000_000, Code: "Unavailable"},
		// What the trace shows matches as before.
		{Method: "PullImage", Match: map[string]string{"auth.username": "alice", "image.image": "registry.example/*"}, After: 1_000_000_000, Code: "Unavailable"},
		{Method: "CreateVolume", Match: map[string]string{"name": "pvc-1", "secrets.key": trace.Redacted}, After: 1_000_000_000, Code: "Unavailable"},
	} {
		got, err := s.Add(r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.Inject(context.Background(), "/runtime.v1.ImageService/PullImage", pull); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Inject(context.Background(), "/csi.v1.Controller/CreateVolume", create); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		r, _ := s.Rule(id)
		want := 0
		if i >= 5 {
			want = 3
		}
		if r.Matched != want {
			t.Errorf("rule %s (match %v) matched %d calls, want %d", id, r.Match, r.Matched, want)
		}
	}
	if pull.Auth.Password != "s3cret" || create.Secrets["key"] != "v4lue" {
		t.Errorf("matching changed the request itself: %v %v", pull.Auth, create.Secrets)
	}
}
