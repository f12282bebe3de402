package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestBindMountSharesData publishes a volume with --mount=bind twice and checks that data written
// through the first publish is read through the second, that a read-only publish is read-only,
// and that unpublish unmounts and removes the target. The mounts happen in a private mount
// namespace of one locked OS thread (the driver is called directly, on that thread), so nothing
// can leak into the host's mount table; the test verifies that too.
func TestBindMountSharesData(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root (CAP_SYS_ADMIN); run the tests as root to cover --mount=bind")
	}
	data, pods, staging := t.TempDir(), t.TempDir(), t.TempDir()
	v := plantVictim(t)
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread and its private mount namespace end with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("unshare mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- fmt.Errorf("make mounts private: %w", err)
			return
		}
		// The driver opens its data directory here, in the namespace it mounts in, as a
		// csi-fake process does: the kernel bind-mounts only sources of the caller's namespace.
		d, err := New(Config{NodeID: node, DataDir: data, AttachRequired: true, Capacity: 100 * gib, Mount: MountBind})
		if err != nil {
			errc <- err
			return
		}
		defer d.Close()
		if err := bindScenario(d, pods, staging); err != nil {
			errc <- err
			return
		}
		errc <- bindRefusesSymlinkTargets(d, pods, staging, v)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), pods) {
		t.Fatalf("a bind mount under %s is visible outside the test's namespace", pods)
	}
	v.intact(t)
}

// bindRefusesSymlinkTargets: a target_path that is a symlink (to the victim's directory, or to
// its file for a block volume) is refused before anything is mounted, so nothing is mounted over
// the victim.
func bindRefusesSymlinkTargets(d *Driver, pods, staging string, v *victim) error {
	blk := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	for i, tc := range []struct {
		to    string
		capab *csi.VolumeCapability
	}{{v.dir, snw}, {v.file, blk}} {
		link := filepath.Join(pods, fmt.Sprintf("link-%d", i))
		if err := os.Symlink(tc.to, link); err != nil {
			return err
		}
		_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: fmt.Sprintf("csi-link-%d", i), TargetPath: link, VolumeCapability: tc.capab,
			VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "1Mi"}})
		if status.Code(err) != codes.InvalidArgument {
			return fmt.Errorf("bind publish at a symlink to %s: %v, want InvalidArgument", tc.to, err)
		}
		if mountedHere(tc.to) || mountedHere(link) {
			return fmt.Errorf("something was mounted at %s through the symlink %s", tc.to, link)
		}
	}
	return nil
}

func bindScenario(d *Driver, pods, staging string) error {
	v, err := d.CreateVolume(ctx, createReq("bind", gib))
	if err != nil {
		return err
	}
	id := v.GetVolume().GetVolumeId()
	if _, err := d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: snw}); err != nil {
		return err
	}
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: snw}); err != nil {
		return err
	}
	t1, t2 := filepath.Join(pods, "pod-1"), filepath.Join(pods, "pod-2")
	publish := func(target string, ro bool) error {
		_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: snw, Readonly: ro})
		return err
	}
	unpublish := func(target string) error {
		_, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
		return err
	}
	if err := publish(t1, false); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(t1, "hello"), []byte("from pod-1"), 0o644); err != nil {
		return fmt.Errorf("write through the first publish: %w", err)
	}
	if !mountedHere(t1) {
		return fmt.Errorf("%s is not a mount point after NodePublishVolume", t1)
	}
	if err := unpublish(t1); err != nil {
		return err
	}
	if _, err := os.Stat(t1); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("target %s not removed: %v", t1, err)
	}
	if err := publish(t2, true); err != nil {
		return err
	}
	got, err := os.ReadFile(filepath.Join(t2, "hello"))
	if err != nil || string(got) != "from pod-1" {
		return fmt.Errorf("read through the second publish: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(t2, "nope"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("write through a read-only publish: %v, want EROFS", err)
	}
	if err := unpublish(t2); err != nil {
		return err
	}
	if mountedHere(t2) {
		return fmt.Errorf("%s still mounted after NodeUnpublishVolume", t2)
	}
	return nil
}

// mountedHere reports whether p is a mount point in the calling thread's mount namespace.
func mountedHere(p string) bool {
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}
