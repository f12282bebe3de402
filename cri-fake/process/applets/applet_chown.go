package applets

import (
	"io/fs"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// appletChown is busybox chown USER[:GROUP] FILE... (and chgrp GROUP
// FILE...), with -R (recursive), -h (the link itself) and -f (quiet). Names
// are looked up in the container's /etc/passwd and /etc/group; numbers are
// taken as they are. The kernel decides (kernel.Proc.Chown): without
// CAP_CHOWN, "chown: /x: Operation not permitted".
func appletChown(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) < 2 {
		p.Errorf("usage: %s [-Rhf] %s FILE...", p.Name(), map[bool]string{true: "GROUP", false: "USER[:GROUP]"}[p.Name() == "chgrp"])
		return 1
	}
	uid, gid := -1, -1
	user, group, hasGroup := strings.Cut(args[0], ":")
	if p.Name() == "chgrp" {
		user, group, hasGroup = "", args[0], true
	}
	if user != "" {
		if uid = lookupID(p, "/etc/passwd", user); uid < 0 {
			p.Errorf("unknown user %s", user)
			return 1
		}
	}
	if hasGroup && group != "" {
		if gid = lookupID(p, "/etc/group", group); gid < 0 {
			p.Errorf("unknown group %s", group)
			return 1
		}
	}
	code := 0
	var change func(name string)
	change = func(name string) {
		abs := p.Abs(name)
		if err := p.Chown(abs, uid, gid, opts['h'] == ""); err != nil {
			if opts['f'] == "" {
				p.Errorf("%s: %s", name, vfs.Strerror(err))
			}
			code = 1
			return
		}
		if opts['R'] == "" {
			return
		}
		st, err := p.FS().Lstat(abs)
		if err != nil || !st.IsDir() {
			return
		}
		entries, _ := p.FS().ReadDir(abs)
		for _, e := range entries {
			change(strings.TrimSuffix(name, "/") + "/" + e.Name())
		}
	}
	for _, name := range args[1:] {
		change(name)
	}
	return code
}

// lookupID is a name's id in an /etc/passwd-style file (the third field), or
// the number itself; -1 when neither.
func lookupID(p *kernel.Proc, file, name string) int {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n
	}
	data, _ := p.FS().ReadFile(file)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 2 && f[0] == name {
			if n, err := strconv.Atoi(f[2]); err == nil {
				return n
			}
		}
	}
	return -1
}

// appletMknod is busybox mknod [-m MODE] NAME TYPE [MAJOR MINOR]: TYPE c or
// u (character device) and b (block device) need CAP_MKNOD, p (FIFO) does
// not. The kernel decides (kernel.Proc.Mknod): "mknod: /x: Operation not
// permitted". The node exists and is listed; opening it is not simulated
// (vfs.MknodAs).
func appletMknod(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "m")
	if err != nil {
		return libbb.Usage(p, err)
	}
	// 0666 less the umask (0022; the simulation's umask is fixed), or -m exactly, as busybox does.
	perm, ok := modeOption(p, opts, 0o644)
	if !ok {
		return 1
	}
	perm = perm.Perm()
	if len(args) < 2 {
		p.Errorf("usage: mknod [-m MODE] NAME TYPE [MAJOR MINOR]")
		return 1
	}
	var mode fs.FileMode
	switch args[1] {
	case "c", "u":
		mode = fs.ModeDevice | fs.ModeCharDevice
	case "b":
		mode = fs.ModeDevice
	case "p":
		mode = fs.ModeNamedPipe
	default:
		p.Errorf("invalid type '%s'", args[1])
		return 1
	}
	wantNumbers := mode&fs.ModeDevice != 0
	if wantNumbers != (len(args) == 4) || len(args) > 4 {
		p.Errorf("usage: mknod [-m MODE] NAME TYPE [MAJOR MINOR]")
		return 1
	}
	for _, n := range args[2:] {
		if _, err := strconv.ParseUint(n, 10, 32); err != nil {
			p.Errorf("invalid number '%s'", n)
			return 1
		}
	}
	if err := p.Mknod(p.Abs(args[0]), mode|perm); err != nil {
		p.Errorf("%s: %s", args[0], vfs.Strerror(err))
		return 1
	}
	return 0
}
