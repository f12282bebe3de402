package seccomp

import (
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// RuntimeDefaultProfile is the simulation's RuntimeDefault profile, containerd's default
// (contrib/seccomp.DefaultProfile) cut down to the system calls a simulated program can make:
// everything not listed fails with EPERM; the file, process and socket calls below are allowed,
// socket(2) except for AF_ALG and AF_VSOCK, clone(2) only without namespace flags; and
// sethostname, setdomainname, mount, umount2, unshare, setns and clone with any flags are
// allowed only when CAP_SYS_ADMIN is in the bounding set (sysAdmin), as containerd adds them.
// The calls containerd allows that the simulation never makes are left out: the filter's
// verdict on them would never be asked.
func RuntimeDefaultProfile(sysAdmin bool) *specs.LinuxSeccomp {
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{
				"accept", "accept4", "chmod", "chown", "creat", "execve", "execveat", "exit", "exit_group",
				"fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fork", "kill", "lchown",
				"link", "linkat", "listen", "bind", "connect", "mkdir", "mkdirat", "mknod", "mknodat",
				"open", "openat", "openat2", "read", "rename", "renameat", "renameat2", "rmdir",
				"symlink", "symlinkat", "tgkill", "tkill", "uname", "unlink", "unlinkat", "utimensat",
				"vfork", "write",
			}, Action: specs.ActAllow},
			// containerd's three socket rules: every family but AF_ALG (38) and AF_VSOCK (40).
			{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: syscall.AF_ALG, Op: specs.OpLessThan}}},
			{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: syscall.AF_ALG + 1, Op: specs.OpEqualTo}}},
			{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 40, Op: specs.OpGreaterThan}}},
		},
	}
	if sysAdmin {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names:  []string{"clone", "clone3", "mount", "setdomainname", "sethostname", "setns", "umount2", "unshare"},
			Action: specs.ActAllow,
		})
		return p
	}
	const newNamespaces = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUSER |
		syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | 0x02000000 // CLONE_NEWCGROUP
	nosys := uint(syscall.ENOSYS)
	p.Syscalls = append(p.Syscalls,
		specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: newNamespaces, ValueTwo: 0, Op: specs.OpMaskedEqual}}},
		// containerd: clone3 gives ENOSYS rather than EPERM without CAP_SYS_ADMIN, so libc
		// falls back to clone (moby/moby#42681).
		specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &nosys},
	)
	return p
}

// RuntimeDefault is RuntimeDefaultProfile compiled; the two filters are built once and shared
// (a Filter is immutable).
func RuntimeDefault(sysAdmin bool) *Filter {
	if sysAdmin {
		return runtimeDefaults[1]
	}
	return runtimeDefaults[0]
}

var runtimeDefaults = [2]*Filter{mustCompile(RuntimeDefaultProfile(false)), mustCompile(RuntimeDefaultProfile(true))}

func mustCompile(p *specs.LinuxSeccomp) *Filter {
	f, err := Compile(p)
	if err != nil {
		panic("seccomp: the runtime default profile does not compile: " + err.Error())
	}
	return f
}
