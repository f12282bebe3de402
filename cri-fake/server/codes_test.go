package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crifake "k8s.io/cri-client/pkg/fake"

	"github.com/plugsim/plugsim/internal/endpoint"
)

// startUpstream serves k8s.io/cri-client/pkg/fake, the upstream fake, on a socket in dir.
func startUpstream(t testing.TB, dir string) clients {
	t.Helper()
	f := crifake.NewFakeRemoteRuntime()
	ep := endpoint.URL(filepath.Join(dir, "upstream.sock"))
	if err := f.Start(ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	conn := dial(t, ep)
	return clients{rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn)}
}

// The codes a client under test sees for requests a real runtime refuses or treats as idempotent,
// from cri-fake (containerd's codes) and from the upstream fake, side by side: what the README's
// comparison table states. The upstream fake answers plain errors (Unknown) where containerd says
// NotFound, and accepts what containerd refuses.
func TestErrorCodesBesideTheUpstreamFake(t *testing.T) {
	_, ours := start(t, Options{})
	upstream := startUpstream(t, t.TempDir())
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		call           func(clients) error
		want, upstream codes.Code
	}{
		{"ContainerStatus of an unknown container", func(c clients) error {
			_, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
			return err
		}, codes.NotFound, codes.Unknown},
		{"StartContainer of an unknown container", func(c clients) error {
			_, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: "nope"})
			return err
		}, codes.NotFound, codes.Unknown},
		{"StopContainer of an unknown container (idempotent)", func(c clients) error {
			_, err := c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "nope"})
			return err
		}, codes.OK, codes.Unknown},
		{"RemoveContainer of an unknown container (idempotent)", func(c clients) error {
			_, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "nope"})
			return err
		}, codes.OK, codes.OK},
		{"PodSandboxStatus of an unknown sandbox", func(c clients) error {
			_, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "nope"})
			return err
		}, codes.NotFound, codes.Unknown},
		{"StopPodSandbox of an unknown sandbox (idempotent)", func(c clients) error {
			_, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "nope"})
			return err
		}, codes.OK, codes.Unknown},
		{"RemovePodSandbox of an unknown sandbox (idempotent)", func(c clients) error {
			_, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "nope"})
			return err
		}, codes.OK, codes.OK},
		{"CreateContainer in an unknown sandbox", func(c clients) error {
			_, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", SandboxConfig: podConfig("x"),
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "a"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}})
			return err
		}, codes.NotFound, codes.OK},
		{"RunPodSandbox with an unknown runtime handler", func(c clients) error {
			_, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("h"), RuntimeHandler: "nope"})
			return err
		}, codes.InvalidArgument, codes.OK},
		{"PullImage of an empty reference", func(c clients) error {
			_, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{}})
			return err
		}, codes.InvalidArgument, codes.OK},
		{"PullImage of an image the registry lacks", func(c clients) error {
			_, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "example.com/nope:1"}})
			return err
		}, codes.NotFound, codes.OK},
		{"RemoveImage of an unknown image (idempotent)", func(c clients) error {
			_, err := c.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "example.com/nope:1"}})
			return err
		}, codes.OK, codes.OK},
		{"ExecSync in an unknown container", func(c clients) error {
			_, err := c.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "nope", Cmd: []string{"true"}})
			return err
		}, codes.NotFound, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call(ours)); got != tc.want {
				t.Errorf("cri-fake: %s, want %s", got, tc.want)
			}
			if got := status.Code(tc.call(upstream)); got != tc.upstream {
				t.Errorf("upstream fake: %s, the README says %s", got, tc.upstream)
			}
		})
	}
}

// A RunPodSandbox whose config has no metadata is InvalidArgument from cri-fake; the upstream fake
// dereferences the missing metadata and takes the whole test binary down (it runs here in a
// child process).
func TestSandboxWithoutMetadataBesideTheUpstreamFake(t *testing.T) {
	req := &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}}
	if dir := os.Getenv("PLUGSIM_UPSTREAM_CHILD_DIR"); dir != "" {
		// The child dies in the call, before any cleanup: its socket goes in the parent's dir.
		startUpstream(t, dir).rt.RunPodSandbox(context.Background(), req)
		return
	}
	_, ours := start(t, Options{})
	if _, err := ours.rt.RunPodSandbox(context.Background(), req); status.Code(err) != codes.InvalidArgument {
		t.Errorf("cri-fake: %v, want InvalidArgument", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSandboxWithoutMetadataBesideTheUpstreamFake$")
	cmd.Env = append(os.Environ(), "PLUGSIM_UPSTREAM_CHILD_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "nil pointer dereference") {
		t.Errorf("upstream fake: the child ended with %v, the README says it panics:\n%s", err, out)
	}
}
