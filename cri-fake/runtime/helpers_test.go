package runtime

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
)

const busybox = "registry.k8s.io/e2e-test-images/busybox:1.29-2"

// newService returns a runtime service over a fresh root directory and an image service with an
// instant catalog; busybox is already pulled.
func newService(t testing.TB, mods ...func(*Options)) *Service {
	t.Helper()
	cat, err := images.NewCatalog(0, images.Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	img := images.NewService(images.Options{Catalog: cat, FSPath: t.TempDir()})
	opts := Options{RootDir: t.TempDir(), Images: img}
	for _, m := range mods {
		m(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: busybox}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name, Attempt: 0},
		Labels:      map[string]string{"app": name, "io.kubernetes.pod.uid": "uid-" + name},
		Annotations: map[string]string{"note": "pod " + name},
	}
}

func runPod(t testing.TB, s *Service, name string) string {
	t.Helper()
	resp, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig(name)})
	if err != nil {
		t.Fatalf("RunPodSandbox(%s): %v", name, err)
	}
	return resp.PodSandboxId
}

func containerConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: name},
		Image:       &runtimeapi.ImageSpec{Image: busybox},
		Command:     []string{"sleep", "3600"},
		Labels:      map[string]string{"container": name},
		Annotations: map[string]string{"io.kubernetes.container.hash": "abc123"},
		LogPath:     name + "/0.log",
	}
}

func createContainer(t testing.TB, s *Service, podID, name string) string {
	t.Helper()
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: podID, Config: containerConfig(name), SandboxConfig: podConfig("x"),
	})
	if err != nil {
		t.Fatalf("CreateContainer(%s): %v", name, err)
	}
	return resp.ContainerId
}

func startContainer(t testing.TB, s *Service, id string) {
	t.Helper()
	if _, err := s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
}

func containerState(t testing.TB, s *Service, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := s.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

func sandboxState(t testing.TB, s *Service, id string) *runtimeapi.PodSandboxStatus {
	t.Helper()
	resp, err := s.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	return resp.Status
}

// wantCode fails unless err carries the gRPC code want (codes.OK means no error).
func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got code %v (%v), want %v", got, err, want)
	}
}

// createWithLogPath runs pod "p" with the given log_directory and creates container "c" in it
// with the given log_path, returning the pod's ID and CreateContainer's answer.
func createWithLogPath(t testing.TB, s *Service, logDir, logPath string) (string, *runtimeapi.CreateContainerResponse, error) {
	t.Helper()
	cfg := podConfig("p")
	cfg.LogDirectory = logDir
	pod, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	c := containerConfig("c")
	c.LogPath = logPath
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: c})
	return pod.PodSandboxId, resp, err
}
