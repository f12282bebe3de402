package process

import (
	"context"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"syscall"
)

// The calls in this file are the simulation's system calls: what an applet
// or the shell asks of the "kernel" when a real program would ask Linux (open
// a file for writing, make or remove one, bind a port, connect, set the host
// name, send a signal). Each takes the caller's identity from its task and
// decides there, so capabilities, seccomp and limits can be enforced in this
// one place rather than in each applet (gVisor's syscalls/linux plays the
// same part). Reads of the file system view go to FS directly: only writes
// are permission checked (vfs.Cred).

// OpenWrite opens p for writing as the caller (open(2) with O_CREAT, and
// O_APPEND when appendMode).
func (p *proc) OpenWrite(path string, appendMode bool, perm fs.FileMode) (io.WriteCloser, error) {
	return p.c.fs.OpenWriteAs(p.cred(), path, appendMode, perm)
}

// WriteFile replaces path's content as the caller.
func (p *proc) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return p.c.fs.WriteFileAs(p.cred(), path, data, perm)
}

// Touch creates path or updates its times as the caller (utimensat(2)).
func (p *proc) Touch(path string) error { return p.c.fs.TouchAs(p.cred(), path) }

// Mkdir makes a directory as the caller (mkdir(2)).
func (p *proc) Mkdir(path string, perm fs.FileMode) error {
	return p.c.fs.MkdirAs(p.cred(), path, perm)
}

// MkdirAll makes a directory and its missing parents as the caller.
func (p *proc) MkdirAll(path string, perm fs.FileMode) error {
	return p.c.fs.MkdirAllAs(p.cred(), path, perm)
}

// Remove removes path (and what is below it when recursive) as the caller.
func (p *proc) Remove(path string, recursive bool) error {
	return p.c.fs.RemoveAs(p.cred(), path, recursive)
}

// Rename renames from to to as the caller (rename(2)).
func (p *proc) Rename(from, to string) error { return p.c.fs.RenameAs(p.cred(), from, to) }

// Symlink makes path a symbolic link to target as the caller (symlink(2)).
func (p *proc) Symlink(target, path string) error { return p.c.fs.SymlinkAs(p.cred(), target, path) }

// Chmod changes path's mode as the caller (chmod(2)).
func (p *proc) Chmod(path string, mode fs.FileMode) error {
	return p.c.fs.ChmodAs(p.cred(), path, mode)
}

// SetHostname is sethostname(2): it needs CAP_SYS_ADMIN in the container's
// UTS namespace (and uid 0, since capabilities are not per user here).
func (p *proc) SetHostname(name string) error {
	if !p.t.id.hasCap("CAP_SYS_ADMIN") || p.t.id.UID != 0 {
		return syscall.EPERM
	}
	p.c.mu.Lock()
	p.c.hostname = name
	p.c.mu.Unlock()
	return nil
}

// Kill is kill(2) from inside the container: pid -1 is every process but the
// caller and init, 0 the caller's process group (here every process of the
// namespace but the caller; init may be among them and its rule decides), and
// a process of another user is EPERM unless the caller is root. sig 0 only
// checks. It reports, per target, ESRCH when there is none and EPERM for each
// it may not signal; it signals the others.
func (p *proc) Kill(pid int, sig syscall.Signal) (denied int, err error) {
	var targets []*task
	if pid == -1 || pid == 0 {
		for _, t := range p.c.nsTasks() {
			// kill(2): -1 is every process but the caller and init, so pid 1 is left
			// out; 0 (the caller's process group) may include it, and the init rule of
			// signalFromInside decides.
			if t != p.t && (pid == 0 || t.pid != 1) {
				targets = append(targets, t)
			}
		}
	} else if t := p.c.task(pid); t != nil {
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		return 0, syscall.ESRCH
	}
	for _, t := range targets {
		if p.t.id.UID != 0 && t.id.UID != p.t.id.UID {
			denied++
			continue
		}
		if sig != 0 {
			t.signalFromInside(sig)
		}
	}
	return denied, nil
}

// Listen binds a TCP port in the container's network namespace: the
// runtime's Spec.Listen when it has one, the namespace at Spec.NetNS, or the
// node's (a host-network pod).
func (p *proc) Listen(port int) (net.Listener, error) {
	addr := ":" + strconv.Itoa(port)
	switch {
	case p.c.spec.Listen != nil:
		return p.c.spec.Listen("tcp", addr)
	case p.c.spec.NetNS != "":
		return ListenInNetNS(p.c.spec.NetNS, "tcp", addr)
	}
	return net.Listen("tcp", addr)
}

// Dial connects from the container's network namespace to addr, an IP
// address and port. Without a kernel namespace (Spec.Listen) there is no
// route: ENETUNREACH.
func (p *proc) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	switch {
	case p.c.spec.Listen != nil:
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	case p.c.spec.NetNS != "":
		return DialInNetNS(ctx, p.c.spec.NetNS, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
