package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/fixtures"
)

const exampleFixtures = "../../examples/fixtures/node.yaml"

// What a CRI client (crictl, a kubelet) sees of the example fixtures, over the socket.
func TestFixturesOverTheSocket(t *testing.T) {
	ctx := context.Background()
	srv, c := start(t, Options{FixturesFile: exampleFixtures, StreamingAddr: "none"})
	if evs := srv.Recorder().Events(); len(evs) != 0 {
		t.Fatalf("preloading (CNI off) recorded %d events: %+v", len(evs), evs)
	}

	pods, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("ListPodSandbox: %v %v", pods, err)
	}
	if p := pods.Items[0]; p.Id != "web-7c9f" || p.State != runtimeapi.PodSandboxState_SANDBOX_READY || p.Labels["io.kubernetes.pod.name"] != "web" ||
		p.CreatedAt != time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC).UnixNano() {
		t.Errorf("web pod %v", p)
	}
	if p := pods.Items[1]; p.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || p.RuntimeHandler != "runc" || p.Metadata.GetAttempt() != 1 {
		t.Errorf("nightly-report pod %v", p)
	}
	st, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "web-7c9f"})
	if err != nil || !strings.HasPrefix(st.Status.Network.GetIp(), "10.88.") {
		t.Errorf("web pod network %v %v: want an address from the built-in allocator", st, err)
	}
	st, err = c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pods.Items[2].Id})
	if err != nil || st.Status.Linux.GetNamespaces().GetOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		t.Errorf("node-exporter pod %v %v: want the node's network", st, err)
	}

	ctrs, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(ctrs.Containers) != 5 {
		t.Fatalf("ListContainers: %v %v", ctrs, err)
	}
	byName := map[string]*runtimeapi.Container{}
	for _, ct := range ctrs.Containers {
		byName[ct.Metadata.GetName()] = ct
	}
	for name, want := range map[string]runtimeapi.ContainerState{
		"nginx": runtimeapi.ContainerState_CONTAINER_RUNNING, "cart": runtimeapi.ContainerState_CONTAINER_RUNNING,
		"migrate": runtimeapi.ContainerState_CONTAINER_EXITED, "report": runtimeapi.ContainerState_CONTAINER_EXITED,
		"exporter": runtimeapi.ContainerState_CONTAINER_CREATED,
	} {
		if ct := byName[name]; ct == nil || ct.State != want {
			t.Errorf("container %s: %v, want %v", name, ct, want)
		}
	}
	report, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: byName["report"].Id})
	if err != nil {
		t.Fatal(err)
	}
	if s := report.Status; s.ExitCode != 3 || s.Reason != "Error" || s.Message != "report upload failed: connection refused" ||
		s.FinishedAt != time.Date(2025, 6, 1, 2, 3, 20, 0, time.UTC).UnixNano() || s.StartedAt >= s.FinishedAt || s.CreatedAt > s.StartedAt {
		t.Errorf("report: %v", s)
	}

	imgs, err := c.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(imgs.Images) != 4 {
		t.Fatalf("ListImages: %v %v", imgs, err)
	}
	cart, err := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.example.com/shop/cart:2.1.0"}})
	if err != nil || cart.Image.GetSize() != 31457280 || cart.Image.GetId() != "sha256:6a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9" ||
		cart.Image.GetUid().GetValue() != 1000 {
		t.Errorf("cart image %v %v", cart, err)
	}
	pause, _ := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10"}})
	if !pause.GetImage().GetPinned() {
		t.Errorf("pause image not pinned: %v", pause)
	}

	// A preloaded RUNNING container stops, an EXITED one is removed, a CREATED one starts.
	if _, err := c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: byName["nginx"].Id, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: byName["nginx"].Id}); s.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("nginx after StopContainer: %v", s)
	}
	if _, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "web-migrate"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: byName["exporter"].Id}); err != nil {
		t.Fatal(err)
	}
	if ctrs, _ := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); len(ctrs.GetContainers()) != 4 {
		t.Errorf("after the removal: %v", ctrs)
	}
}

// Fixtures seed a state directory once; after that the state directory is what a restart finds.
func TestFixturesSeedTheStateDirOnce(t *testing.T) {
	ctx := context.Background()
	state, root := t.TempDir(), t.TempDir()
	fx := func() *fixtures.CRI {
		return &fixtures.CRI{
			Images: []fixtures.Image{{RepoTags: []string{"registry.example.com/app:1"}, Size: 777, Cmd: []string{"sleep", "infinity"}, Pinned: true}},
			Pods:   []fixtures.Pod{{ID: "p1", Name: "p", Namespace: "ns", UID: "u"}},
			Containers: []fixtures.Container{
				{ID: "c1", Name: "c", Pod: "p", Image: "registry.example.com/app:1"},
				{ID: "c2", Name: "done", Pod: "p", Image: "registry.example.com/app:1", State: fixtures.Exited, ExitCode: 2},
			},
		}
	}
	var logMu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, format)
	}
	s1, c := start(t, Options{StateDir: state, RootDir: root, Fixtures: fx(), Logf: logf})
	if _, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "c2"}); err != nil {
		t.Fatal(err)
	}
	s1.Close()

	// The restart finds the state as it was left (c2 removed, c1 RUNNING again, the image the
	// catalog does not have with its config), not the fixtures once more.
	s2, c := start(t, Options{StateDir: state, RootDir: root, Fixtures: fx(), Logf: logf})
	ctrs, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(ctrs.Containers) != 1 || ctrs.Containers[0].Id != "c1" || ctrs.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("containers after the restart: %v %v", ctrs, err)
	}
	img, err := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.example.com/app:1"}})
	if err != nil || img.GetImage().GetSize() != 777 || !img.GetImage().GetPinned() {
		t.Fatalf("the fixture's image after the restart: %v %v", img, err)
	}
	if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "p1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.Image.Id}}); err != nil {
		t.Fatal(err)
	}
	s2.Close()

	// Emptied by the client, the state directory stays empty: it was seeded already.
	_, c = start(t, Options{StateDir: state, RootDir: root, Fixtures: fx(), Logf: logf})
	if pods, _ := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); len(pods.GetItems()) != 0 {
		t.Fatalf("fixtures applied again to a seeded state dir: %v", pods)
	}
	logMu.Lock()
	skipped := 0
	for _, l := range logs {
		if strings.HasPrefix(l, "fixtures not applied: state dir %s was seeded from %s already") {
			skipped++
		}
	}
	logMu.Unlock()
	if skipped != 2 {
		t.Errorf("logged %d skips, want 2: %q", skipped, logs)
	}

	// A state dir with state from a run without fixtures is not seeded either.
	other := t.TempDir()
	s4, c := start(t, Options{StateDir: other, RootDir: t.TempDir()})
	if _, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("mine")}); err != nil {
		t.Fatal(err)
	}
	s4.Close()
	_, c = start(t, Options{StateDir: other, RootDir: t.TempDir(), Fixtures: fx()})
	if pods, _ := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); len(pods.GetItems()) != 1 || pods.Items[0].Metadata.Name != "mine" {
		t.Fatalf("fixtures applied over existing state: %v", pods)
	}
}

// A bad fixture stops the start with an error naming the file and the entry, and a preload that
// fails part-way leaves nothing in the state dir, so the next start seeds it.
func TestBadFixturesStopTheStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "fixtures.yaml")
	os.WriteFile(file, []byte(`cri:
  images: [{image: "registry.k8s.io/e2e-test-images/busybox:1.29-2"}]
  pods:
    - {name: web, namespace: default, uid: u1}
    - {name: db, namespace: default, uid: u2}
  containers:
    - {name: a, pod: web, image: "registry.k8s.io/e2e-test-images/busybox:1.29-2", command: [sleep, infinity]}
    - {name: b, pod: db, image: "registry.k8s.io/e2e-test-images/busybox:1.29-2", command: [/no/such/program]}
    - {name: web, pod: pod-x, image: "registry.k8s.io/e2e-test-images/busybox:1.29-2"}
`), 0o600)
	_, err := Start(Options{FixturesFile: file})
	if want := file + `: cri.containers[2] "web": pod "pod-x" not found`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %v\nwant %s…", err, want)
	}

	b, _ := os.ReadFile(file)
	os.WriteFile(file, []byte(strings.Replace(string(b), "pod: pod-x", "pod: web", 1)), 0o600)
	state := filepath.Join(dir, "state")
	_, err = Start(Options{FixturesFile: file, StateDir: state, RootDir: filepath.Join(dir, "root")})
	if want := file + `: cri.containers[1] "b": its process does not start: `; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %v\nwant %s…", err, want)
	}
	for _, sub := range []string{"sandboxes", "containers"} {
		if ents, _ := os.ReadDir(filepath.Join(state, sub)); len(ents) != 0 {
			t.Errorf("a failed preload left %s records: %v", sub, ents)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "fixtures-applied.json")); err == nil {
		t.Error("a failed preload marked the state dir seeded")
	}

	os.WriteFile(file, []byte(strings.Replace(strings.Replace(string(b), "/no/such/program", "sleep", 1), "pod: pod-x", "pod: db", 1)), 0o600)
	_, c := start(t, Options{FixturesFile: file, StateDir: state, RootDir: filepath.Join(dir, "root")})
	if ctrs, err := c.rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{}); err != nil || len(ctrs.Containers) != 3 {
		t.Fatalf("after fixing the file: %v %v", ctrs, err)
	}
}
