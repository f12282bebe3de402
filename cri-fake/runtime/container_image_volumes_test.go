package runtime

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// An image volume through the CRI, as the kubelet sends it: the pulled image's reference in
// Mount.image, its content read-only at the container path, and ContainerStatus naming the
// image's reference in the mount (KEP-5365's image_ref).
func TestImageVolumeThroughCRI(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	ref := s.images.Store()
	img, ok := ref.Get(busybox)
	if !ok {
		t.Fatal("busybox not pulled")
	}
	pod := runPod(t, s, "iv")
	cfg := containerConfig("c")
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/volume", Readonly: true, Image: &runtimeapi.ImageSpec{Image: img.ID, UserSpecifiedImage: busybox}}}
	resp, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg, SandboxConfig: podConfig("iv")})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	out, err := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: resp.ContainerId, Cmd: []string{"sh", "-c", "ls /volume/bin/sh && touch /volume/x"}, Timeout: int64(time.Minute / time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Stdout) != "/volume/bin/sh\n" || out.ExitCode != 1 || string(out.Stderr) != "touch: /volume/x: Read-only file system\n" {
		t.Errorf("ls and touch in the image volume: exit %d, %q %q", out.ExitCode, out.Stdout, out.Stderr)
	}
	mounts := containerState(t, s, resp.ContainerId).GetMounts()
	if len(mounts) != 1 || mounts[0].GetImage().GetImageRef() != img.ID {
		t.Errorf("ContainerStatus mounts %v: want the image volume with image_ref %s", mounts, img.ID)
	}
	if cfg.Mounts[0].GetImage().GetImageRef() != "" {
		t.Error("ContainerStatus changed the container's config")
	}
}
