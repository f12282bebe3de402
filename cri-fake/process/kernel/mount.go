package kernel

import "syscall"

// Mount is mount(2) with MS_BIND (MS_REC when recursive) from inside the
// container: it needs CAP_SYS_ADMIN (and uid 0, since capabilities are not
// per user here). Only a privileged container's mount below a bidirectional
// mount reaches the host (vfs.FS.BindMount): that is the mount a kubelet
// allows to propagate, the one critest checks on the host.
func (p *Proc) Mount(src, dst string, recursive bool) error {
	if !p.t.id.hasCap("CAP_SYS_ADMIN") || p.t.id.UID != 0 {
		return syscall.EPERM
	}
	return p.c.fs.BindMount(src, dst, recursive, p.t.id.Privileged)
}

// Unmount is umount(2) from inside the container (CAP_SYS_ADMIN).
func (p *Proc) Unmount(dst string) error {
	if !p.t.id.hasCap("CAP_SYS_ADMIN") || p.t.id.UID != 0 {
		return syscall.EPERM
	}
	return p.c.fs.Unmount(dst)
}
