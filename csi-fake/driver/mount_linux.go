package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/plugsim/plugsim/csi-fake/state"
)

// The target and staging paths belong to the CO (kubelet puts them under its pods directory);
// csi-fake works at them like csi-driver-host-path does (mount.CleanupMountPoint: unmount, then
// os.Remove, never a recursive removal) and, beyond that, never follows a symlink found there and
// removes only the very directory or file it created (state.Target.Made).

// openNoFollow opens p with O_PATH|O_NOFOLLOW: a symlink at p is opened itself, never followed.
func openNoFollow(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// fdPath names an open file for a path-taking system call: the kernel resolves it to that file's
// inode, so nothing swapped in at the original path since it was opened is used.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/thread-self/fd/%d", f.Fd()) }

// fileID identifies an open file (see state.FileID), a symlink opened with O_PATH included.
func fileID(f *os.File) (state.FileID, error) {
	var stx unix.Statx_t
	err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx)
	runtime.KeepAlive(f)
	if err != nil {
		return state.FileID{}, err
	}
	id := state.FileID{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino, Type: uint32(stx.Mode) & unix.S_IFMT}
	if stx.Mask&unix.STATX_BTIME != 0 {
		id.Birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	}
	return id, nil
}

// bindMount bind-mounts src onto target (both O_PATH files the caller checked), read-only when
// asked. The mount goes through fdPath, so exactly the checked inodes are used. A read-only bind
// mount takes two steps: the kernel ignores MS_RDONLY on the first MS_BIND and honours it on a
// remount, which must name the new mount: targetPath is opened again (it now resolves to the
// mount's root) and must be src.
func bindMount(src, target *os.File, targetPath string, readOnly bool) error {
	err := unix.Mount(fdPath(src), fdPath(target), "", unix.MS_BIND, "")
	runtime.KeepAlive(src)
	runtime.KeepAlive(target)
	if err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src.Name(), targetPath, err)
	}
	if !readOnly {
		return nil
	}
	top, err := openNoFollow(targetPath)
	if err == nil {
		defer top.Close()
		var want, got state.FileID
		if want, err = fileID(src); err == nil {
			if got, err = fileID(top); err == nil && (got.Dev != want.Dev || got.Ino != want.Ino) {
				err = errors.New("the target path no longer leads to the new mount")
			}
		}
	}
	if err == nil {
		err = unix.Mount("", fdPath(top), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	if err != nil {
		unix.Unmount(targetPath, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		return fmt.Errorf("remount %s read-only: %w", targetPath, err)
	}
	return nil
}

// unmountAll unmounts target until nothing is mounted there (a target published twice with the
// same arguments is still mounted once, but be safe against stacked mounts). UMOUNT_NOFOLLOW: a
// symlink swapped in at the target is not followed to unmount something else.
func unmountAll(target string) error {
	for i := 0; i < 16; i++ {
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
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

// makeTarget creates the publish target, a directory (mount) or an empty file (block), in the
// parent the CO made, and returns what it made; nil when the target was already there. An existing
// target must be of the right kind: a symlink or anything else is refused, never followed.
func makeTarget(target, accessType string) (*state.FileID, error) {
	var err error
	var made *os.File
	if accessType == state.AccessBlock {
		// O_EXCL never follows a symlink at the path (open(2)).
		made, err = os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o640)
	} else if err = os.Mkdir(target, 0o750); err == nil {
		made, err = openNoFollow(target)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		f, err := openNoFollow(target)
		if err != nil {
			return nil, fmt.Errorf("target_path %s: %w", target, err)
		}
		defer f.Close()
		if err := checkKind(f, accessType); err != nil {
			return nil, fmt.Errorf("target_path %s exists and %v: %w", target, err, state.ErrInvalid)
		}
		return nil, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("target_path %s: its parent directory must exist (the CO creates it, as kubelet does): %w", target, state.ErrFailedPrecondition)
	case err != nil:
		return nil, fmt.Errorf("create target %s: %w", target, err)
	}
	defer made.Close()
	id, err := fileID(made)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// removeTarget removes what NodePublishVolume made at target (spec: the SP MUST delete the file
// or directory it created at target_path as part of NodeUnpublishVolume), and only that: nothing
// when csi-fake did not make it (made is nil) or when what is there now is another inode (the
// CO or someone else replaced it). A directory is removed only when empty (rmdir), like
// mount.CleanupMountPoint's os.Remove; nothing is ever removed recursively.
func removeTarget(target string, made *state.FileID) error {
	if made == nil {
		return nil
	}
	f, err := openNoFollow(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove target %s: %w", target, err)
	}
	now, err := fileID(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("remove target %s: %w", target, err)
	}
	if now != *made {
		return nil // what csi-fake created is gone already
	}
	if now.Type == unix.S_IFDIR {
		err = unix.Rmdir(target)
	} else {
		err = unix.Unlink(target)
	}
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("remove target %s: %w", target, err)
}
