package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

type clients struct {
	rt  runtimeapi.RuntimeServiceClient
	img runtimeapi.ImageServiceClient
}

func start(t testing.TB, opts Options) (*Server, clients) {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clients{rt: runtimeapi.NewRuntimeServiceClient(dial(t, s.Endpoint())), img: runtimeapi.NewImageServiceClient(dial(t, s.ImageEndpoint()))}
}

func dial(t testing.TB, ep string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name}}
}

func TestStartZeroOptions(t *testing.T) {
	ctx := context.Background()
	a, ca := start(t, Options{})
	b, cb := start(t, Options{}) // two in one process
	if a.Endpoint() == b.Endpoint() || !strings.HasPrefix(a.Endpoint(), "unix:///") {
		t.Fatalf("endpoints %s %s", a.Endpoint(), b.Endpoint())
	}
	for _, c := range []clients{ca, cb} {
		v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
		if err != nil || v.Version != "0.1.0" {
			t.Fatalf("Version: %v %v", v, err)
		}
	}
	if _, err := ca.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("only-in-a")}); err != nil {
		t.Fatal(err)
	}
	list, _ := cb.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if len(list.Items) != 0 {
		t.Fatal("two servers share state")
	}
	evs := a.Recorder().Events()
	if len(evs) != 2 || evs[0].Method != "Version" || evs[1].Method != "RunPodSandbox" || evs[1].Interface != "CRI" || evs[1].Caller != "kubelet" || len(evs[1].Request) == 0 {
		t.Fatalf("trace %+v", evs)
	}
	p, _ := filepathOf(a.Endpoint())
	a.Close()
	if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
		t.Fatalf("temporary socket directory left behind: %v", err)
	}
}

func filepathOf(ep string) (string, error) { return strings.TrimPrefix(ep, "unix://"), nil }

func TestFaultsAndTrace(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, Options{})
	ids, err := s.Faults().Add(faults.Rule{Method: "PullImage", Match: map[string]string{"image.image": "*busybox*"}, Code: "Unavailable", Message: "registry down", Times: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Faults().Add(faults.Rule{Method: "PullImag", Code: "Unavailable"}); err == nil || !strings.Contains(err.Error(), "did you mean PullImage?") {
		t.Fatalf("a misspelt method: %v", err)
	}
	pull := func(img string) error {
		_, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img},
			Auth: &runtimeapi.AuthConfig{Username: "u", Password: "hunter2"}})
		return err
	}
	if err := pull("registry.k8s.io/pause:3.9"); err != nil {
		t.Fatalf("unmatched image failed: %v", err)
	}
	if err := pull("busybox"); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "registry down") {
		t.Fatalf("first busybox pull: %v", err)
	}
	if err := pull("busybox"); err != nil {
		t.Fatalf("rule should be used up: %v", err)
	}
	evs := s.Recorder().Events()
	if len(evs) != 3 || evs[1].Code != "Unavailable" || evs[2].Code != "OK" {
		t.Fatalf("trace codes: %+v", evs)
	}
	if evs[1].Attrs[trace.FaultAttr] != ids[0] || evs[0].Attrs[trace.FaultAttr] != "" || evs[2].Attrs[trace.FaultAttr] != "" {
		t.Fatalf("the fault is not named in its event alone: %v %v %v", evs[0].Attrs, evs[1].Attrs, evs[2].Attrs)
	}
	if r, _ := s.Faults().Rule(ids[0]); r.Hits != 1 || r.Matched != 1 {
		t.Fatalf("used-up rule: %+v", r)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Request), "hunter2") {
			t.Fatalf("password in the trace: %s", ev.Request)
		}
	}
}

func TestAdminSocket(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, c := start(t, Options{AdminSocket: "unix://" + filepath.Join(dir, "admin.sock")})
	ac, err := admin.NewClient(s.AdminEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.AddFaults(faults.Rule{Method: "RunPodSandbox", Match: map[string]string{"config.metadata.name": "doomed"}, Code: "ResourceExhausted"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("doomed")})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("fault from the admin socket not applied: %v", err)
	}
	if _, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("fine")}); err != nil {
		t.Fatal(err)
	}
	evs, err := ac.Trace(0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("admin trace: %v %v", evs, err)
	}
	if err := ac.ClearFaults(); err != nil || len(s.Faults().Rules()) != 0 {
		t.Fatalf("clear: %v", err)
	}
}

// A call cut by the client's deadline, in an injected delay or in a slow image pull, is
// DeadlineExceeded for the client and in the trace, every time: grpc-go's server context is mostly
// canceled by the client's RST_STREAM before its own deadline fires (see trace.cutByDeadline),
// which the trace used to record as Canceled in 8 of 10 calls.
func TestDeadlineCutCallsAreDeadlineExceeded(t *testing.T) {
	slow, err := images.NewCatalog(images.DefaultPullLatency, images.CatalogImage{Repositories: []string{"example.com/slow"}, Tags: []string{"1"}, PullLatency: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	s, c := start(t, Options{Catalog: slow})
	s.Faults().Add(faults.Rule{Method: "Status", Delay: faults.Duration(time.Minute)})
	events, unsubscribe := s.Recorder().Subscribe(4)
	t.Cleanup(unsubscribe)
	for _, tc := range []struct {
		method string
		call   func(context.Context) error
	}{
		{"Status", func(ctx context.Context) error { _, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{}); return err }},
		{"PullImage", func(ctx context.Context) error {
			_, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "example.com/slow:1"}})
			return err
		}},
	} {
		for i := range 20 {
			// 300 ms: short enough for 20 runs in a row, long enough that the call reaches the
			// handler on a busy machine (grpc-go refuses one whose deadline passed on the way,
			// before any interceptor, and nothing is traced).
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := tc.call(ctx)
			cancel()
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("%s run %d: the client got %v, want DeadlineExceeded", tc.method, i, err)
			}
			select {
			case ev := <-events:
				if ev.Method != tc.method || ev.Code != "DeadlineExceeded" {
					t.Errorf("%s run %d: traced %s %s %q, want DeadlineExceeded", tc.method, i, ev.Method, ev.Code, ev.Error)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s run %d: nothing traced in 30s", tc.method, i)
			}
		}
	}
}

func TestStateDirSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	state, root := t.TempDir(), t.TempDir()
	s1, c := start(t, Options{StateDir: state, RootDir: root})
	if _, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("keep")})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		// A container meant to keep running runs sleep: busybox's default sh exits at once without
		// stdin, as on containerd, so the status would depend on whether it had started yet.
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
		Command: []string{"sleep", "3600"}, Labels: map[string]string{"l": "v"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.ContainerId})
	beforePod, _ := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod.PodSandboxId})
	s1.Close()

	_, c2 := start(t, Options{StateDir: state, RootDir: root})
	after, err := c2.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.ContainerId})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before.Status, after.Status) {
		t.Fatalf("container changed across restart:\n%v\n%v", before.Status, after.Status)
	}
	afterPod, err := c2.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod.PodSandboxId})
	if err != nil || !proto.Equal(beforePod.Status, afterPod.Status) {
		t.Fatalf("sandbox changed across restart: %v", err)
	}
	img, _ := c2.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	if img.Image == nil {
		t.Fatal("pulled image forgotten")
	}
	// The restored container still stops like a running one, and its name is still taken.
	if _, err := c2.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctr.ContainerId, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	_, err = c2.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("keep")})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("restored sandbox name not reserved: %v", err)
	}
}

func TestSplitImageEndpoint(t *testing.T) {
	dir := t.TempDir()
	s, c := start(t, Options{Endpoint: "unix://" + filepath.Join(dir, "rt.sock"), ImageEndpoint: "unix://" + filepath.Join(dir, "img.sock")})
	if s.ImageEndpoint() == s.Endpoint() {
		t.Fatal("not split")
	}
	if _, err := c.img.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	onRuntime := runtimeapi.NewImageServiceClient(dial(t, s.Endpoint()))
	if _, err := onRuntime.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("image service also on the runtime socket: %v", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // leaves a socket file nobody listens on
	s, _ := start(t, Options{Endpoint: "unix://" + p})
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	if _, err := Start(Options{Endpoint: s.Endpoint()}); err == nil {
		t.Fatal("a live socket was taken over")
	}
}

func TestStreamRPCsMatchLists(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, Options{})
	c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	pod, _ := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("p")})
	c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}})

	pods, _ := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	ps, err := c.rt.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, ps.Recv); len(got) != 1 || !proto.Equal(got[0].(*runtimeapi.StreamPodSandboxesResponse).PodSandboxes[0], pods.Items[0]) {
		t.Fatalf("StreamPodSandboxes %v", got)
	}
	ctrs, _ := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	cs, _ := c.rt.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	if got := drain(t, cs.Recv); len(got) != 1 || !proto.Equal(got[0].(*runtimeapi.StreamContainersResponse).Containers[0], ctrs.Containers[0]) {
		t.Fatalf("StreamContainers %v", got)
	}
	imgs, _ := c.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	is, _ := c.img.StreamImages(ctx, &runtimeapi.StreamImagesRequest{})
	if got := drain(t, is.Recv); len(got) != 1 || !proto.Equal(got[0].(*runtimeapi.StreamImagesResponse).Images[0], imgs.Images[0]) {
		t.Fatalf("StreamImages %v", got)
	}
	css, _ := c.rt.StreamContainerStats(ctx, &runtimeapi.StreamContainerStatsRequest{})
	if got := drain(t, css.Recv); len(got) != 1 || len(got[0].(*runtimeapi.StreamContainerStatsResponse).ContainerStats) != 1 {
		t.Fatalf("StreamContainerStats %v", got)
	}
	pss, _ := c.rt.StreamPodSandboxStats(ctx, &runtimeapi.StreamPodSandboxStatsRequest{})
	if got := drain(t, pss.Recv); len(got) != 1 || len(got[0].(*runtimeapi.StreamPodSandboxStatsResponse).PodSandboxStats) != 1 {
		t.Fatalf("StreamPodSandboxStats %v", got)
	}
	pm, _ := c.rt.StreamPodSandboxMetrics(ctx, &runtimeapi.StreamPodSandboxMetricsRequest{})
	if _, err := pm.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("StreamPodSandboxMetrics: %v", err)
	}
}

func drain[T proto.Message](t testing.TB, recv func() (T, error)) []proto.Message {
	t.Helper()
	var out []proto.Message
	for {
		m, err := recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

func TestCNIConfigAppearsWithoutRestart(t *testing.T) {
	ctx := context.Background()
	conf, bin := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(bin, "okplugin"), []byte("#!/bin/sh\ncat >/dev/null\n[ \"$CNI_COMMAND\" = ADD ] && printf '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.77.0.3/24\"}]}'\nexit 0\n"), 0o755)
	s, c := start(t, Options{CNIConfDir: conf, CNIBinDirs: []string{bin}})
	netReady := func() *runtimeapi.RuntimeCondition {
		resp, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status.Conditions[1]
	}
	if n := netReady(); n.Status || n.Reason != "NetworkPluginNotReady" || !strings.Contains(n.Message, "cni plugin not initialized") {
		t.Fatalf("empty conf dir: %v", n)
	}
	_, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("early")})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("RunPodSandbox without CNI config: %v", err)
	}
	os.WriteFile(filepath.Join(conf, "10-ok.conflist"), []byte(`{"cniVersion":"1.0.0","name":"ok","plugins":[{"type":"okplugin"}]}`), 0o644)
	if n := netReady(); !n.Status {
		t.Fatalf("after dropping a conflist: %v", n)
	}
	pod, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("later")})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod.PodSandboxId})
	if st.Status.Network.Ip != "10.77.0.3" {
		t.Fatalf("pod IP %q, want the CNI result's", st.Status.Network.Ip)
	}
	var cniEvents int
	for _, ev := range s.Recorder().Events() {
		if ev.Interface == "CNI" && ev.Method == "ADD" && ev.Caller == "cri-fake" && ev.Attrs["containerID"] == pod.PodSandboxId {
			cniEvents++
		}
	}
	if cniEvents != 1 {
		t.Fatalf("%d CNI ADD events in the trace, want 1", cniEvents)
	}
}

// The cluster's path to a Ready node: no conflist, the kubelet's UpdateRuntimeConfig brings the pod
// CIDR, cri-fake renders examples/cni/pod-cidr.conflist.tmpl with it, and a pod gets an address
// of that CIDR. A template flag that cannot work fails the start.
func TestCNIConfTemplateFromPodCIDR(t *testing.T) {
	ctx := context.Background()
	tmpl := filepath.Join("..", "..", "examples", "cni", "pod-cidr.conflist.tmpl")
	for name, opts := range map[string]Options{
		"missing template": {CNIConfDir: t.TempDir(), CNIConfTemplate: filepath.Join(t.TempDir(), "nope")},
		"CNI off":          {CNIConfTemplate: tmpl},
	} {
		if s, err := Start(opts); err == nil {
			s.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}
	conf := t.TempDir()
	_, c := start(t, Options{CNIConfDir: conf, CNIBinDirs: []string{t.TempDir()}, CNIConfTemplate: tmpl})
	netReady := func() bool {
		resp, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status.Conditions[1].Status
	}
	if netReady() {
		t.Fatal("network ready before the pod CIDR")
	}
	if _, err := c.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.5.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	if !netReady() {
		t.Fatal("network not ready after UpdateRuntimeConfig rendered the template")
	}
	resp, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := resp.Info["cniConfigFile"]; f != filepath.Join(conf, "10-containerd-net.conflist") || !strings.Contains(resp.Info["cniconfig"], `10.244.5.0/24`) {
		t.Fatalf("loaded %q: %s", f, resp.Info["cniconfig"])
	}
}

func TestExampleFaultsFile(t *testing.T) {
	s, c := start(t, Options{FaultsFile: "../../examples/cri/faults.yaml"})
	if n := len(s.Faults().Rules()); n != 4 {
		t.Fatalf("%d rules loaded, want 4", n)
	}
	_, err := c.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "flaky-1", Namespace: "default", Uid: "u"}}})
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "no IP addresses available") {
		t.Fatalf("cni-failure rule: %v", err)
	}
}

// The streaming server is built on first use: its port answers before any Exec (an unknown
// session is 404, as cri-streaming has it), and Exec hands out a URL on that port whose session
// the server knows (a request that does not upgrade the connection is refused, not 404).
func TestStreamingServerBuiltOnFirstUse(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, Options{})
	get := func(url string) int {
		t.Helper()
		resp, err := http.Post(url, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(s.StreamingURL() + "/exec/nope"); code != http.StatusNotFound {
		t.Fatalf("unknown session: HTTP %d, want 404", code)
	}
	ctr := createContainer(t, c, "p", "sleep", "3600")
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr}); err != nil {
		t.Fatal(err)
	}
	ex, err := c.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctr, Cmd: []string{"true"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ex.Url, s.StreamingURL()+"/exec/") {
		t.Fatalf("exec URL %s is not on %s", ex.Url, s.StreamingURL())
	}
	if code := get(ex.Url); code == http.StatusNotFound || code/100 == 2 {
		t.Fatalf("exec session without an upgrade: HTTP %d, want it refused", code)
	}
}
