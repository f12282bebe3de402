package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// bindMount bind-mounts src onto target, read-only when asked. A read-only bind mount takes two
// steps: the kernel ignores MS_RDONLY on the first MS_BIND and honours it on a remount.
func bindMount(src, target string, readOnly bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src, target, err)
	}
	if readOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			unix.Unmount(target, unix.MNT_DETACH)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// unmountAll unmounts target until nothing is mounted there (a target published twice with the
// same arguments is still mounted once, but be safe against stacked mounts).
func unmountAll(target string) error {
	for i := 0; i < 16; i++ {
		err := unix.Unmount(target, 0)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("unmount %s: %w (something still uses it)", target, err)
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return nil
}

// removeTarget removes the file or directory NodePublishVolume created (spec: the SP MUST delete
// the file or directory it created at target_path as part of NodeUnpublishVolume).
func removeTarget(target string) error {
	err := os.Remove(target)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("remove target %s: %w", target, err)
}
