package server

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/runtime"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/crashtest"
	"github.com/plugsim/plugsim/internal/endpoint"
)

// A request larger than the kubelet's and containerd's 16 MiB is answered ResourceExhausted
// before it is read, and cri-fake goes on serving.
func TestOversizedRequestIsResourceExhausted(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, Options{StreamingAddr: "none"})
	huge := &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"app": strings.Repeat("x", 17<<20)}}}
	if _, err := c.rt.ListPodSandbox(ctx, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("17 MiB request: %v, want ResourceExhausted", err)
	}
	if _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("after the oversized request: %v", err)
	}
}

// panickingLauncher stands for a defect of a launcher: starting a container panics.
type panickingLauncher struct{}

func (panickingLauncher) Start(context.Context, runtime.ProcessSpec) (runtime.Process, error) {
	panic("injected launcher defect")
}

// A handler that panics answers Internal and logs the panic; the process and the server live on.
func TestHandlerPanicIsInternal(t *testing.T) {
	ctx := context.Background()
	var log crashtest.Log
	s, c := start(t, Options{StreamingAddr: "none", Launcher: panickingLauncher{}, Logf: log.Logf})
	_, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: createContainer(t, c, "p", "sleep", "1")})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "injected launcher defect") {
		t.Fatalf("StartContainer with a panicking launcher: %v, want Internal", err)
	}
	if l := log.String(); !strings.Contains(l, "handler panicked") || !strings.Contains(l, "StartContainer") || !strings.Contains(l, "injected launcher defect") {
		t.Fatalf("panic not logged:\n%s", l)
	}
	if _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
	evs := s.Recorder().Events()
	if last := evs[len(evs)-2]; last.Method != "StartContainer" || last.Code != "Internal" {
		t.Fatalf("trace records %s %s, want StartContainer Internal", last.Method, last.Code)
	}
}

// The sockets are 0660 and the admin socket 0600 unless asked otherwise.
func TestSocketModes(t *testing.T) {
	dir, err := endpoint.MkdirTemp("cri-fake-", len("admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	modes := func(s *Server) (sock, img, adm os.FileMode) {
		t.Helper()
		for p, m := range map[string]*os.FileMode{s.Endpoint(): &sock, s.ImageEndpoint(): &img, s.AdminEndpoint(): &adm} {
			fi, err := os.Stat(strings.TrimPrefix(p, "unix://"))
			if err != nil {
				t.Fatal(err)
			}
			*m = fi.Mode().Perm()
		}
		return
	}
	ep := func(name string) string { return endpoint.URL(filepath.Join(dir, name)) }
	s, _ := start(t, Options{StreamingAddr: "none", Endpoint: ep("cri.sock"), ImageEndpoint: ep("img.sock"), AdminSocket: ep("admin.sock")})
	if sock, img, adm := modes(s); sock != 0o660 || img != 0o660 || adm != 0o600 {
		t.Errorf("default modes: runtime %v, image %v, admin %v; want 0660 0660 0600", sock, img, adm)
	}
	s.Close()
	s, _ = start(t, Options{StreamingAddr: "none", Endpoint: ep("cri.sock"), ImageEndpoint: ep("img.sock"), AdminSocket: ep("admin.sock"),
		SocketMode: 0o600, AdminSocketMode: 0o640})
	if sock, img, adm := modes(s); sock != 0o600 || img != 0o600 || adm != 0o640 {
		t.Errorf("asked modes: runtime %v, image %v, admin %v; want 0600 0600 0640", sock, img, adm)
	}
}

// The same FaultSeed and the same calls make a probabilistic rule hit the same calls, and the
// events of the faulted calls record the seed.
func TestFaultSeedRepeatsARun(t *testing.T) {
	ctx := context.Background()
	run := func(seed uint64) (hits string, seeds map[string]bool) {
		s, c := start(t, Options{StreamingAddr: "none", FaultSeed: seed})
		if s.FaultSeed() != seed {
			t.Fatalf("FaultSeed() = %d, want %d", s.FaultSeed(), seed)
		}
		if _, err := s.Faults().Add(faults.Rule{Method: "Version", Code: "Unavailable", Probability: 0.5}); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for range 40 {
			_, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
			b.WriteString(map[bool]string{true: "x", false: "."}[status.Code(err) == codes.Unavailable])
		}
		seeds = map[string]bool{}
		for _, ev := range s.Recorder().Events() {
			if ev.Attrs[trace.FaultAttr] != "" {
				seeds[ev.Attrs[trace.FaultSeedAttr]] = true
			}
		}
		s.Close()
		return b.String(), seeds
	}
	a, seedsA := run(11)
	b, _ := run(11)
	c, _ := run(12)
	if a != b || a == c || !strings.Contains(a, "x") {
		t.Fatalf("seed 11: %s and %s; seed 12: %s", a, b, c)
	}
	if len(seedsA) != 1 || !seedsA["11"] {
		t.Fatalf("faulted events record seeds %v, want only 11", seedsA)
	}
}

// The streaming server listens on loopback by default, and its session URLs carry unguessable
// single-use tokens: two Execs get two tokens, and a URL opens no second session.
func TestStreamingURLsAreLoopbackOneTimeTokens(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, Options{})
	u, err := url.Parse(s.StreamingURL())
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("streaming URL %s (%v), want one on 127.0.0.1", s.StreamingURL(), err)
	}
	ctr := createContainer(t, c, "p", "sleep", "3600")
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr}); err != nil {
		t.Fatal(err)
	}
	token := func() string {
		ex, err := c.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctr, Cmd: []string{"true"}, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := strings.CutPrefix(ex.Url, s.StreamingURL()+"/exec/")
		if !ok || len(tok) < 8 {
			t.Fatalf("exec URL %s: want %s/exec/<token of 8 or more characters>", ex.Url, s.StreamingURL())
		}
		return tok
	}
	first, second := token(), token()
	if first == second {
		t.Fatalf("two Execs got the same token %s", first)
	}
	post := func(tok string) int {
		t.Helper()
		resp, err := http.Post(s.StreamingURL()+"/exec/"+tok, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(first); code == http.StatusNotFound {
		t.Fatalf("first use of a token: HTTP 404, want the session found")
	}
	if code := post(first); code != http.StatusNotFound {
		t.Fatalf("second use of a token: HTTP %d, want 404 (tokens are single-use)", code)
	}
	last := "A"
	if strings.HasSuffix(second, last) {
		last = "B"
	}
	if code := post(second[:len(second)-1] + last); code != http.StatusNotFound {
		t.Fatalf("a token one character off: HTTP %d, want 404", code)
	}
}

// createContainer pulls busybox, runs the pod and creates a container "app" of it running cmd; it
// returns the container's ID.
func createContainer(t testing.TB, c clients, pod string, cmd ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	sb, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig(pod)})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Command: cmd}})
	if err != nil {
		t.Fatal(err)
	}
	return ctr.ContainerId
}
