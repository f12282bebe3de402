package kernel

import "syscall"

// Mount is mount(2) with MS_BIND (MS_REC when recursive) from inside the
// container: the seccomp filter first, then CAP_SYS_ADMIN. Only a privileged
// container's mount below a bidirectional mount reaches the host
// (vfs.FS.BindMount): that is the mount a kubelet allows to propagate, the
// one critest checks on the host.
func (p *Proc) Mount(src, dst string, recursive bool) error {
	flags := syscall.MS_BIND
	if recursive {
		flags |= syscall.MS_REC
	}
	if stop, err := p.seccomp("mount", unknownArg, unknownArg, unknownArg, intArg(flags), unknownArg); stop {
		return err
	}
	if err := p.need(CapSysAdmin); err != nil {
		return err
	}
	return p.c.fs.BindMount(src, dst, recursive, p.t.id.Privileged)
}

// Unmount is umount2(2) from inside the container (seccomp, then
// CAP_SYS_ADMIN).
func (p *Proc) Unmount(dst string) error {
	if stop, err := p.seccomp("umount2", unknownArg, intArg(0)); stop {
		return err
	}
	if err := p.need(CapSysAdmin); err != nil {
		return err
	}
	return p.c.fs.Unmount(dst)
}
