package kernel

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/seccomp"
)

// The container's seccomp filter (Spec.Seccomp) is consulted at the top of each simulated
// system call in syscalls.go, before the call's own checks (capabilities, permissions), as the
// kernel runs the filter on syscall entry. Each call is named as busybox makes it on x86-64
// (chmod(2) rather than fchmodat(2), openat(2) rather than open(2)) and passes the arguments the
// simulation has a value for; pointers and file descriptors are seccomp.Unknown. Process
// creation (clone, execve) is not filtered: on a node, a profile that blocks it stops the
// container before its command runs, which the simulation does not model.

// atFDCWD is AT_FDCWD, openat's and utimensat's directory argument.
const atFDCWD = -100

var (
	unknownArg = seccomp.Unknown
	atCWDArg   = intArg(atFDCWD)
)

func intArg(v int) seccomp.Arg { return seccomp.Value(uint64(int64(v))) }

// seccomp runs the container's filter on the system call name with args: stop says the call
// must not run, and err is what it returns then. With no filter it is a nil check.
func (p *Proc) seccomp(name string, args ...seccomp.Arg) (stop bool, err error) {
	if p.c.spec.Seccomp == nil {
		return false, nil
	}
	return p.filtered(name, args)
}

func (p *Proc) filtered(name string, args []seccomp.Arg) (bool, error) {
	v := p.c.spec.Seccomp.Decide(name, args...)
	switch v.Action {
	case seccomp.Allow, seccomp.Log:
		return false, nil
	case seccomp.Errno:
		if v.Errno == 0 {
			return true, nil // the call is skipped and reports success
		}
		return true, v.Errno
	case seccomp.Trap:
		// SIGSYS: a handler (a shell's trap) may take it; by default it ends the process.
		p.t.mu.Lock()
		h := p.t.handler
		p.t.mu.Unlock()
		if h == nil || !h(syscall.SIGSYS) {
			p.t.terminate(128 + int(syscall.SIGSYS))
		}
		return true, syscall.ENOSYS
	case seccomp.KillThread, seccomp.KillProcess:
		// A simulated process has one thread: either ends it, killed by SIGSYS.
		p.t.terminate(128 + int(syscall.SIGSYS))
		return true, syscall.ENOSYS
	}
	return true, v.Errno // Trace: no tracer is attached
}

// seccompStatus is the Seccomp and Seccomp_filters lines of /proc/<pid>/status: mode 2
// (SECCOMP_MODE_FILTER) with one filter when the container has one, 0 otherwise.
func (c *container) seccompStatus() string {
	if c.spec.Seccomp == nil {
		return "Seccomp:\t0\nSeccomp_filters:\t0\n"
	}
	return "Seccomp:\t2\nSeccomp_filters:\t1\n"
}

// orSkipped is what a call that makes something (a file descriptor, a process) returns when the
// filter skipped it with errno 0: the real call "returns" 0 (fd 0, or the child's side of a
// fork), which the simulation has no object for, so it fails with ENOSYS instead.
func orSkipped(err error) error {
	if err == nil {
		return syscall.ENOSYS
	}
	return err
}

// openFlags are openat's flags for a write (O_WRONLY|O_CREAT, and O_APPEND or O_TRUNC).
func openFlags(appendMode bool) seccomp.Arg {
	fl := syscall.O_WRONLY | syscall.O_CREAT | syscall.O_CLOEXEC
	if appendMode {
		fl |= syscall.O_APPEND
	} else {
		fl |= syscall.O_TRUNC
	}
	return seccomp.Value(uint64(fl))
}

// seccompRemove filters a removal: rmdir(2) for a directory, unlink(2) for anything else, as
// busybox rm and rmdir call them (for rm -r, the verdict on the top path).
func (p *Proc) seccompRemove(path string) (bool, error) {
	if p.c.spec.Seccomp == nil {
		return false, nil
	}
	name := "unlink"
	if st, err := p.c.fs.Lstat(path); err == nil && st.IsDir() {
		name = "rmdir"
	}
	return p.filtered(name, []seccomp.Arg{unknownArg})
}

// seccompSocket filters the socket(2) call a TCP server or client starts with
// (AF_INET, SOCK_STREAM) and then each of the calls named.
func (p *Proc) seccompSocket(calls ...string) error {
	if p.c.spec.Seccomp == nil {
		return nil
	}
	if stop, err := p.filtered("socket", []seccomp.Arg{intArg(syscall.AF_INET), intArg(syscall.SOCK_STREAM), intArg(0)}); stop {
		return os.NewSyscallError("socket", orSkipped(err))
	}
	for _, name := range calls {
		if stop, err := p.filtered(name, []seccomp.Arg{unknownArg, unknownArg, unknownArg}); stop {
			if err == nil {
				continue // skipped, "succeeded": the next call goes on
			}
			return os.NewSyscallError(name, err)
		}
	}
	return nil
}

// modeArg is a file mode as the mode_t argument of chmod(2), mkdir(2) and openat(2): its
// permission bits, and setuid, setgid and sticky whether given as Go's flags or as octal.
func modeArg(m fs.FileMode) seccomp.Arg {
	v := uint64(m & 0o7777) // the applets pass chmod's octal mode as it is
	if m&fs.ModeSetuid != 0 {
		v |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		v |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		v |= syscall.S_ISVTX
	}
	return seccomp.Value(v)
}
