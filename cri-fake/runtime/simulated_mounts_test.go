package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSimulatedMountPropagation: CreateContainer refuses a bidirectional mount whose host path is
// not on a shared mount with containerd's error; a container's view holding kernel mounts (the
// private copy of an rprivate mount, a bidirectional mount) is kept, and RemoveContainer takes
// away what its processes mounted on the host. It runs on one locked OS thread in a mount
// namespace of its own, calling the handlers there (CreateContainer and RemoveContainer do their
// work on the caller's goroutine), so nothing reaches the host's mount table.
func TestSimulatedMountPropagation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mount propagation needs mounts (CAP_SYS_ADMIN); run the tests as root to cover it")
	}
	s := newService(t)
	sim, ok := s.launcher.(*Simulated)
	if !ok {
		t.Fatalf("the default launcher is %T", s.launcher)
	}
	pod := runPod(t, s, "p")
	base := t.TempDir()
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	create := func(name string, prop runtimeapi.MountPropagation) (string, error) {
		cfg := containerConfig(name)
		cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}
		cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: mnt, HostPath: mnt, Propagation: prop}}
		resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
		return resp.GetContainerId(), err
	}
	remove := func(id string) error {
		_, err := s.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id})
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread and its namespace end here
		errc <- func() error {
			if err := errors.Join(unix.Unshare(unix.CLONE_NEWNS), unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""),
				unix.Mount(mnt, mnt, "", unix.MS_BIND, ""), unix.Mount("", mnt, "", unix.MS_PRIVATE, "")); err != nil {
				return err
			}
			_, err := create("refused", runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL)
			want := fmt.Sprintf("path %q is mounted on %q but it is not a shared mount", mnt, mnt)
			if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), want) {
				return fmt.Errorf("bidirectional on a private mount: %v, want Unknown with %q", err, want)
			}
			priv, err := create("private", runtimeapi.MountPropagation_PROPAGATION_PRIVATE)
			if err != nil {
				return err
			}
			if err := unix.Mount("", mnt, "", unix.MS_SHARED, ""); err != nil {
				return err
			}
			shared, err := create("shared", runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL)
			if err != nil {
				return err
			}
			sim.mu.Lock()
			privFS, sharedFS := sim.mounts[priv], sim.mounts[shared]
			sim.mu.Unlock()
			if privFS == nil || sharedFS == nil {
				return fmt.Errorf("views kept: private %v, shared %v; want both", privFS != nil, sharedFS != nil)
			}
			// What a privileged process of the container does with mount --bind (kernel.Proc.Mount).
			cmp := filepath.Join(mnt, "cmp")
			if err := errors.Join(sharedFS.MkdirAll(cmp, 0o755), sharedFS.BindMount("/etc", cmp, false, true)); err != nil {
				return err
			}
			if ents, _ := os.ReadDir(cmp); len(ents) == 0 {
				return fmt.Errorf("the host sees nothing at %s after the container's bind", cmp)
			}
			if err := errors.Join(remove(shared), remove(priv)); err != nil {
				return err
			}
			if ents, _ := os.ReadDir(cmp); len(ents) != 0 {
				return fmt.Errorf("after RemoveContainer the host still sees %d entries at %s", len(ents), cmp)
			}
			sim.mu.Lock()
			left := len(sim.mounts)
			sim.mu.Unlock()
			if left != 0 {
				return fmt.Errorf("%d views still kept after their containers were removed", left)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
