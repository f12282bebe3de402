package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The real host mounts made for a bind below a privileged container's
// bidirectional mount (see mounttable.go).

// hostBind makes the real host mount of a bind into a bidirectional mount:
// the source's host tree (a bind of a host-backed path) or a tmpfs holding a
// copy of the container's own tree, attached at dl's host path. Every path
// is opened through the mounts' roots, so nothing outside their host
// directories is named. It returns an O_PATH descriptor on the new mount's
// root (what Release unmounts).
func (f *FS) hostBind(roots *hostRoots, sl, dl loc, dir, recursive bool) (_ *os.File, copied int64, _ error) {
	dr, err := roots.get(dl.m)
	if err != nil {
		return nil, 0, hostErrno(err)
	}
	flags := unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if dir {
		flags |= unix.O_DIRECTORY
	}
	target, err := dr.OpenFile(dl.rel, flags, 0)
	if err != nil {
		return nil, 0, hostErrno(err)
	}
	defer target.Close()
	var tree int
	switch sl.kind {
	case locHost:
		sr, err := roots.get(sl.m)
		if err != nil {
			return nil, 0, hostErrno(err)
		}
		source, err := sr.OpenFile(sl.rel, flags, 0)
		if err != nil {
			return nil, 0, hostErrno(err)
		}
		how := unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH
		if recursive {
			how |= unix.AT_RECURSIVE
		}
		tree, err = unix.OpenTree(int(source.Fd()), "", uint(how))
		source.Close()
		if err != nil {
			return nil, 0, err
		}
	default:
		if !dir {
			return nil, 0, syscall.EINVAL
		}
		if tree, copied, err = f.tmpfsCopy(sl.cpath); err != nil {
			return nil, 0, err
		}
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return nil, 0, err
	}
	// The attached mount's root, held so Release unmounts this mount and no
	// other, wherever it has been moved since.
	root, err := dr.OpenFile(dl.rel, flags, 0)
	if err != nil {
		return nil, 0, hostErrno(err)
	}
	return root, copied, nil
}

// tmpfsCopy makes a detached tmpfs (fsopen/fsmount) holding a copy of the
// container's own tree at cp: sized to what it copies plus a megabyte, and
// refused (ENOSPC) when the copies would hold more than the container's
// memory limit together.
func (f *FS) tmpfsCopy(cp string) (fd int, size int64, _ error) {
	size = 1 << 20
	for p, n := range f.all() {
		if strings.HasPrefix(p, cp+"/") || cp == "/" {
			size += (n.bytes() + 4095) &^ 4095 // tmpfs holds whole pages
		}
	}
	if f.mtab.hostCopyBytes()+size > f.limitBytes() {
		return -1, 0, syscall.ENOSPC
	}
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, 0, err
	}
	defer unix.Close(fsfd)
	if err := errors.Join(unix.FsconfigSetString(fsfd, "size", strconv.FormatInt(size, 10)),
		unix.FsconfigSetString(fsfd, "mode", "755"), unix.FsconfigCreate(fsfd)); err != nil {
		return -1, 0, err
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	r, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(mfd))
	if err == nil {
		err = f.copyTree(r, cp)
		r.Close()
	}
	if err != nil {
		unix.Close(mfd)
		return -1, 0, err
	}
	return mfd, size, nil
}

// copyTree writes the container's own tree below cp into r.
func (f *FS) copyTree(r *os.Root, cp string) error {
	prefix := cp + "/"
	if cp == "/" {
		prefix = "/"
	}
	all := f.all()
	names := make([]string, 0, len(all))
	for p := range all {
		if strings.HasPrefix(p, prefix) {
			names = append(names, p)
		}
	}
	sort.Strings(names) // parents first
	for _, p := range names {
		n, rel := all[p], p[len(prefix):]
		var err error
		switch {
		case n.isDir():
			err = r.Mkdir(rel, n.mode.Perm())
		case n.isSymlink():
			err = r.Symlink(n.target, rel)
		default:
			var w *os.File
			if w, err = r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, n.mode.Perm()); err == nil {
				_, err = io.Copy(w, n.reader())
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// undoHostMount detaches the host mount whose root root is; one already
// gone (the host unmounted it or what held it) is fine.
func undoHostMount(root *os.File) error {
	err := unix.Unmount("/proc/self/fd/"+strconv.Itoa(int(root.Fd())), unix.MNT_DETACH)
	root.Close()
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}
