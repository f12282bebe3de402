package applets

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// appletMount is busybox mount: without a source and mount point it lists
// /proc/mounts (`mount -t TYPE` those of that type) as busybox prints them;
// `mount --bind SRC DST`, `--rbind` and `-o bind` / `-o rbind` bind SRC at
// DST in the container's mount namespace (kernel.Proc.Mount). Mounting a
// file system (`-t tmpfs`, a device) is not simulated and says so.
func appletMount(p *kernel.Proc) int {
	var bind, recursive bool
	fstype := ""
	var args []string
	for i := 1; i < len(p.Args); i++ {
		a := p.Args[i]
		switch {
		case a == "--bind" || a == "-B":
			bind = true
		case a == "--rbind" || a == "-R":
			bind, recursive = true, true
		case (a == "-o" || a == "-t") && i+1 < len(p.Args):
			i++
			if a == "-t" {
				fstype = p.Args[i]
				continue
			}
			for _, o := range strings.Split(p.Args[i], ",") {
				switch o {
				case "bind":
					bind = true
				case "rbind":
					bind, recursive = true, true
				}
			}
		case strings.HasPrefix(a, "-") && a != "-":
			p.Errorf("unrecognized option '%s'", a)
			return 1
		default:
			args = append(args, a)
		}
	}
	if len(args) == 0 && !bind {
		listMounts(p, fstype)
		return 0
	}
	if len(args) != 2 {
		p.Errorf("need a source and a mount point")
		return 1
	}
	src, dst := args[0], args[1]
	if !bind || (fstype != "" && fstype != "none") {
		p.Errorf("mounting %s on %s failed: only bind mounts are simulated", src, dst)
		return 1
	}
	if err := p.Mount(src, dst, recursive); err != nil {
		if errors.Is(err, syscall.EPERM) {
			// busybox's words for EPERM (mount.c, bb_msg_perm_denied_are_you_root).
			p.Errorf("permission denied (are you root?)")
			return 1
		}
		p.Errorf("mounting %s on %s failed: %s", src, dst, vfs.Strerror(err))
		return 1
	}
	return 0
}

// appletUmount is busybox umount: umount DIR... (-l, lazy, is accepted: the
// simulation's unmounts are immediate).
func appletUmount(p *kernel.Proc) int {
	st := 0
	n := 0
	for _, a := range p.Args[1:] {
		if a == "-l" || a == "-f" {
			continue
		}
		n++
		if err := p.Unmount(a); err != nil {
			p.Errorf("can't unmount %s: %s", a, vfs.Strerror(err))
			st = 1
		}
	}
	if n == 0 {
		p.Errorf("need a mount point")
		return 1
	}
	return st
}

// listMounts prints the mount table, of type fstype only when it is set, in
// busybox's format (mount.c: "%s on %s type %s (%s)").
func listMounts(p *kernel.Proc, fstype string) {
	data, _ := p.FS().ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || (fstype != "" && f[2] != fstype) {
			continue
		}
		fmt.Fprintf(p.Stdout, "%s on %s type %s (%s)\n", f[0], f[1], f[2], f[3])
	}
}
