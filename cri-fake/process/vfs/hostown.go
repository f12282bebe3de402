package vfs

import (
	"io/fs"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"
)

// hostCreated gives a file or directory the container just created at rel on a host mount what
// the kernel gives one a container process creates: its permission bits exactly as the program
// asked (the program's umask is the caller's to apply; the runtime's own umask, which the host
// kernel applied to the runtime's open, is not the container's), owned by the caller's uid and
// primary gid, or by the directory's group when the directory is set-group-ID (the kernel gave it
// that group already; the kubelet's fsGroup volumes rely on it). cri-fake, as root, can set both.
// An error leaves what the host made: the file is there either way.
func hostCreated(r *os.Root, rel string, f *os.File, c Cred, perm fs.FileMode) {
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return
	}
	// Through /proc/self/fd: fchmod and fchown refuse an O_PATH descriptor, and the name is
	// the file the descriptor holds, whatever was renamed since.
	name := "/proc/self/fd/" + strconv.Itoa(fd)
	if fs.FileMode(st.Mode&0o777) != perm {
		_ = unix.Fchmodat(unix.AT_FDCWD, name, uint32(perm), 0)
	}
	uid, gid := c.UID, -1
	if len(c.GIDs) > 0 {
		gid = c.GIDs[0]
	}
	if dir, err := r.Stat(path.Dir(rel)); err == nil && dir.Mode()&fs.ModeSetgid != 0 {
		gid = -1
	}
	if uid >= 0 && uint32(uid) == st.Uid {
		uid = -1
	}
	if gid >= 0 && uint32(gid) == st.Gid {
		gid = -1
	}
	if uid != -1 || gid != -1 {
		_ = unix.Fchownat(unix.AT_FDCWD, name, uid, gid, 0)
	}
}
