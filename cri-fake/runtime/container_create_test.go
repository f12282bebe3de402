package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

func TestCreateContainerErrors(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	stopped := runPod(t, s, "stopped")
	if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: stopped}); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*runtimeapi.ContainerConfig)) *runtimeapi.ContainerConfig {
		c := containerConfig("c")
		f(c)
		return c
	}
	for _, tc := range []struct {
		name string
		pod  string
		cfg  *runtimeapi.ContainerConfig
		want codes.Code
	}{
		{"no config", pod, nil, codes.InvalidArgument},
		{"no metadata", pod, mod(func(c *runtimeapi.ContainerConfig) { c.Metadata = nil }), codes.InvalidArgument},
		{"no name", pod, mod(func(c *runtimeapi.ContainerConfig) { c.Metadata.Name = "" }), codes.InvalidArgument},
		{"no image", pod, mod(func(c *runtimeapi.ContainerConfig) { c.Image = nil }), codes.InvalidArgument},
		{"image not pulled", pod, mod(func(c *runtimeapi.ContainerConfig) { c.Image.Image = "nginx:1.27" }), codes.NotFound},
		{"unknown sandbox", "nope", containerConfig("c"), codes.NotFound},
		{"stopped sandbox", stopped, containerConfig("c"), codes.FailedPrecondition},
		{"group without user", pod, mod(func(c *runtimeapi.ContainerConfig) {
			c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: &runtimeapi.Int64Value{Value: 10}}}
		}), codes.InvalidArgument},
		{"image volume not read-only", pod, mod(func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", Image: &runtimeapi.ImageSpec{Image: busybox}}}
		}), codes.InvalidArgument},
		{"image volume not pulled", pod, mod(func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}}
		}), codes.NotFound},
		{"image volume sub-path not in the image", pod, mod(func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", Readonly: true, Image: &runtimeapi.ImageSpec{Image: busybox}, ImageSubPath: "not-existing"}}
		}), codes.Unknown},
		{"ok", pod, containerConfig("c"), codes.OK},
		{"duplicate name", pod, containerConfig("c"), codes.AlreadyExists},
		{"next attempt", pod, mod(func(c *runtimeapi.ContainerConfig) { c.Metadata.Attempt = 1 }), codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: tc.pod, Config: tc.cfg})
			wantCode(t, err, tc.want)
		})
	}
}

func TestCreateContainerStatus(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	cfg := containerConfig("app")
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/tmp", Readonly: true}}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	st := containerState(t, s, resp.ContainerId)
	img, _ := s.images.Store().Get(busybox)
	sb, _ := s.sandboxes.Get(pod)
	switch {
	case st.State != runtimeapi.ContainerState_CONTAINER_CREATED:
		t.Fatalf("state %v, want CREATED", st.State)
	case st.CreatedAt == 0 || st.StartedAt != 0 || st.FinishedAt != 0:
		t.Fatalf("timestamps: %d %d %d", st.CreatedAt, st.StartedAt, st.FinishedAt)
	case st.Image.GetImage() != busybox || st.ImageId != img.ID || !strings.Contains(st.ImageRef, "@sha256:"):
		t.Fatalf("image %v, image_id %q, image_ref %q", st.Image, st.ImageId, st.ImageRef)
	case st.Labels["container"] != "app" || st.Annotations["io.kubernetes.container.hash"] != "abc123":
		t.Fatalf("labels/annotations not echoed: %v %v", st.Labels, st.Annotations)
	case st.LogPath != filepath.Join(sb.LogDirectory, "app/0.log") || !filepath.IsAbs(st.LogPath):
		t.Fatalf("log path %q", st.LogPath)
	case len(st.Mounts) != 1 || st.Mounts[0].HostPath != "/tmp" || !st.Mounts[0].Readonly:
		t.Fatalf("mounts not echoed: %v", st.Mounts)
	case st.StopSignal != runtimeapi.Signal_SIGNAL_SIGTERM:
		t.Fatalf("stop signal %v", st.StopSignal)
	}
}

func TestCreateContainerImageStopSignal(t *testing.T) {
	s := newService(t)
	if _, err := s.images.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/nginx:1.14-2"}}); err != nil {
		t.Fatal(err)
	}
	pod := runPod(t, s, "p")
	cfg := containerConfig("web")
	cfg.Image.Image = "registry.k8s.io/e2e-test-images/nginx:1.14-2"
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if sig := containerState(t, s, resp.ContainerId).StopSignal; sig != runtimeapi.Signal_SIGNAL_SIGQUIT {
		t.Fatalf("stop signal %v, want the image's SIGQUIT", sig)
	}
}

type rejectingLauncher struct{ UntilStopped }

func (rejectingLauncher) Validate(task.Spec) error {
	return errors.New(`exec: "nosuch": executable file not found in $PATH`)
}

func TestCreateContainerValidatorRejects(t *testing.T) {
	s := newService(t, func(o *Options) { o.Launcher = rejectingLauncher{} })
	pod := runPod(t, s, "p")
	_, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: containerConfig("c")})
	wantCode(t, err, codes.Unknown)
	// The name was released.
	s.launcher = UntilStopped{}
	createContainer(t, s, pod, "c")
}

// TestCreateContainerLogPathStaysInLogDirectory: a log_path that leads out of the sandbox's
// log_directory is InvalidArgument, and the victim beside the directory is untouched; the
// neighbours that stay inside (an absolute log_path, "a/../b", names starting with "..") work,
// and the log file is made inside the directory.
func TestCreateContainerLogPathStaysInLogDirectory(t *testing.T) {
	root := t.TempDir()
	logDir := filepath.Join(root, "pods", "default_p_uid")
	victim := filepath.Join(root, "victim")
	secret := filepath.Join(victim, "secret.log")
	os.MkdirAll(logDir, 0o755)
	os.MkdirAll(victim, 0o755)
	os.WriteFile(secret, []byte("keep"), 0o644)
	for _, tc := range []struct {
		logPath string
		want    string // "" means InvalidArgument; else the path under logDir
	}{
		{"../../victim/secret.log", ""},
		{strings.Repeat("../", 40) + secret, ""},
		{"c/../../../victim/secret.log", ""},
		{"..", ""},
		{".", ""},
		{"c/..", ""},
		{"c/0.log\x00", ""},
		{"c/0.log", "c/0.log"},
		{"c/../b.log", "b.log"},
		{secret, strings.TrimPrefix(secret, "/")}, // absolute: inside, as containerd's Join makes it
		{"..c.log", "..c.log"},
		{"c/..0.log", "c/..0.log"},
	} {
		t.Run(tc.logPath, func(t *testing.T) {
			s := newService(t)
			pod, resp, err := createWithLogPath(t, s, logDir, tc.logPath)
			if tc.want == "" {
				wantCode(t, err, codes.InvalidArgument)
				if !strings.Contains(err.Error(), "outside the sandbox's log_directory") && !strings.Contains(err.Error(), "NUL") {
					t.Fatalf("message does not say why: %v", err)
				}
				// The name was released: the same container with a good log_path works.
				c := containerConfig("c")
				c.LogPath = "c/0.log"
				if _, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: c}); err != nil {
					t.Fatalf("after a refused log_path: %v", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				want := filepath.Join(logDir, tc.want)
				if got := containerState(t, s, resp.ContainerId).LogPath; got != want {
					t.Fatalf("log path %q, want %q", got, want)
				}
				startContainer(t, s, resp.ContainerId)
				if _, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: resp.ContainerId}); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(want); err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("log file %s: %v, %v", want, fi, err)
				}
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != "keep" {
				t.Fatalf("the victim: %q, %v", b, err)
			}
			if es, _ := os.ReadDir(victim); len(es) != 1 {
				t.Fatalf("the victim's directory holds %d entries", len(es))
			}
		})
	}
}
