package vfs

import (
	"io/fs"
	"syscall"
)

// MknodAs makes a special file as c (mknod(2)): a character or block device
// (mode fs.ModeDevice, with fs.ModeCharDevice for a character one) or a FIFO
// (fs.ModeNamedPipe). Whether the caller may make a device (CAP_MKNOD) the
// kernel decides before it calls this. The node is listed and stat'ed like
// any file; what a device would do is not simulated, so opening one fails with
// ENXIO (no such device), and so does opening a FIFO (a reader and a writer
// meeting in one is not simulated either). Special files are made only in the
// container's own tree: on a host mount, where they would be real device nodes
// on the host, mknod is EPERM.
func (f *FS) MknodAs(c Cred, p string, mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, false, false)
	if err != nil {
		return pathErr("mknod", p, err)
	}
	if l.kind == locHost {
		if l.ro {
			return pathErr("mknod", p, syscall.EROFS)
		}
		return pathErr("mknod", p, syscall.EPERM)
	}
	return f.create(c, l, "mknod", p, mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe)|mode.Perm())
}

// special reports whether n is a device or FIFO MknodAs made, which opens fail on.
func (n *node) special() bool { return n.mode&(fs.ModeDevice|fs.ModeNamedPipe) != 0 }
