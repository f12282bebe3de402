package vfs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// File system magic numbers, statfs(2)'s f_type (include/uapi/linux/magic.h).
const (
	TmpfsMagic   = unix.TMPFS_MAGIC
	OverlayMagic = unix.OVERLAYFS_SUPER_MAGIC
	ProcMagic    = unix.PROC_SUPER_MAGIC
)

// Statfs is statfs(2)'s f_type for p: on a host mount, what the host says of the mount's file
// there (tmpfs for the kubelet's secret, projected and memory-medium emptyDir volumes, ext4 or
// xfs for a disk); /proc is proc, /dev and /dev/shm tmpfs, the container's own tree overlayfs
// (containerd's snapshotter).
func (f *FS) Statfs(p string) (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, true, false)
	if err != nil {
		return 0, pathErr("statfs", p, err)
	}
	switch l.kind {
	case locHost:
		r, err := roots.get(l.m)
		if err != nil {
			return 0, pathErr("statfs", p, err)
		}
		// O_PATH: neither read permission nor a blocking open (a FIFO) is needed to ask.
		file, err := r.OpenFile(l.rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
		if err != nil {
			return 0, pathErr("statfs", p, err)
		}
		defer file.Close()
		var st unix.Statfs_t
		if err := unix.Fstatfs(int(file.Fd()), &st); err != nil {
			return 0, pathErr("statfs", p, err)
		}
		return int64(st.Type), nil
	case locProc:
		return ProcMagic, nil
	case locDev, locMasked:
		return TmpfsMagic, nil
	}
	if _, ok := f.get(l.cpath); !ok {
		return 0, pathErr("statfs", p, syscall.ENOENT)
	}
	if isTmpfs(l.cpath) || l.cpath == "/dev" {
		return TmpfsMagic, nil
	}
	return OverlayMagic, nil
}
