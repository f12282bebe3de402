package kernel

import (
	"context"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/seccomp"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
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
func (p *Proc) OpenWrite(path string, appendMode bool, perm fs.FileMode) (io.WriteCloser, error) {
	if stop, err := p.seccomp("openat", atCWDArg, unknownArg, openFlags(appendMode), modeArg(perm)); stop {
		return nil, orSkipped(err)
	}
	return p.c.fs.OpenWriteAs(p.Cred(), path, appendMode, perm)
}

// WriteFile replaces path's content as the caller.
func (p *Proc) WriteFile(path string, data []byte, perm fs.FileMode) error {
	if stop, err := p.seccomp("openat", atCWDArg, unknownArg, openFlags(false), modeArg(perm)); stop {
		return err
	}
	return p.c.fs.WriteFileAs(p.Cred(), path, data, perm)
}

// Touch creates path or updates its times as the caller (utimensat(2)).
func (p *Proc) Touch(path string) error {
	if stop, err := p.seccomp("utimensat", atCWDArg, unknownArg, unknownArg, seccomp.Value(0)); stop {
		return err
	}
	return p.c.fs.TouchAs(p.Cred(), path)
}

// Mkdir makes a directory as the caller (mkdir(2)).
func (p *Proc) Mkdir(path string, perm fs.FileMode) error {
	if stop, err := p.seccomp("mkdir", unknownArg, modeArg(perm)); stop {
		return err
	}
	return p.c.fs.MkdirAs(p.Cred(), path, perm)
}

// MkdirAll makes a directory and its missing parents as the caller.
func (p *Proc) MkdirAll(path string, perm fs.FileMode) error {
	if stop, err := p.seccomp("mkdir", unknownArg, modeArg(perm)); stop {
		return err
	}
	return p.c.fs.MkdirAllAs(p.Cred(), path, perm)
}

// Remove removes path (and what is below it when recursive) as the caller.
func (p *Proc) Remove(path string, recursive bool) error {
	if stop, err := p.seccompRemove(path); stop {
		return err
	}
	return p.c.fs.RemoveAs(p.Cred(), path, recursive)
}

// Rename renames from to to as the caller (rename(2)).
func (p *Proc) Rename(from, to string) error {
	if stop, err := p.seccomp("rename", unknownArg, unknownArg); stop {
		return err
	}
	return p.c.fs.RenameAs(p.Cred(), from, to)
}

// Symlink makes path a symbolic link to target as the caller (symlink(2)).
func (p *Proc) Symlink(target, path string) error {
	if stop, err := p.seccomp("symlink", unknownArg, unknownArg); stop {
		return err
	}
	return p.c.fs.SymlinkAs(p.Cred(), target, path)
}

// Chmod changes path's mode as the caller (chmod(2)).
func (p *Proc) Chmod(path string, mode fs.FileMode) error {
	if stop, err := p.seccomp("chmod", unknownArg, modeArg(mode)); stop {
		return err
	}
	return p.c.fs.ChmodAs(p.Cred(), path, mode)
}

// SetHostname is sethostname(2): it needs CAP_SYS_ADMIN in the container's
// UTS namespace.
func (p *Proc) SetHostname(name string) error {
	if stop, err := p.seccomp("sethostname", unknownArg, intArg(len(name))); stop {
		return err
	}
	if err := p.need(CapSysAdmin); err != nil {
		return err
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
func (p *Proc) Kill(pid int, sig syscall.Signal) (denied int, err error) {
	if stop, err := p.seccomp("kill", intArg(pid), intArg(int(sig))); stop {
		return 0, err
	}
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
		if !p.t.id.capable(CapKill) && t.identity().EffectiveUID() != p.t.id.EffectiveUID() {
			denied++
			continue
		}
		if sig != 0 {
			t.signalFromInside(sig)
		}
	}
	return denied, nil
}

// Listen binds a TCP port in the container's network namespace (a port
// below net.ipv4.ip_unprivileged_port_start needs CAP_NET_BIND_SERVICE): the
// runtime's Spec.Listen when it has one, the namespace at Spec.NetNS, or the
// node's (a host-network pod).
func (p *Proc) Listen(port int) (net.Listener, error) {
	if err := p.seccompSocket("bind", "listen"); err != nil {
		return nil, err
	}
	addr := ":" + strconv.Itoa(port)
	if err := p.bindAllowed(port); err != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", err)}
	}
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
func (p *Proc) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := p.seccompSocket("connect"); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	switch {
	case p.c.spec.Listen != nil:
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	case p.c.spec.NetNS != "":
		return DialInNetNS(ctx, p.c.spec.NetNS, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Hostname is the container's host name (uname(2)).
func (p *Proc) Hostname() string { return p.c.getHostname() }

// ReadProcNet reads /proc/net/<file> as the container's network namespace
// shows it.
func (p *Proc) ReadProcNet(file string) ([]byte, error) { return p.c.readProcNet(file) }

// KernelNetwork reports whether the container's network is a kernel
// namespace (its own or the node's) whose /proc/net lists its sockets; with
// the runtime's Spec.Listen registry it is not.
func (p *Proc) KernelNetwork() bool { return p.c.spec.Listen == nil }

// Processes lists the processes of the caller's PID namespace (ps, pgrep).
func (p *Proc) Processes() []ProcessInfo { return p.c.processes() }

// CPUs is how many CPUs the container sees (nproc).
func (p *Proc) CPUs() int { return p.c.spec.CPUs }

// ReadinessFailing reports whether the image behaviour makes the container's
// health endpoints fail.
func (p *Proc) ReadinessFailing() bool { return !p.c.readiness }

// LookPath resolves name as execvp(3) does with env's PATH, from dir.
func (p *Proc) LookPath(name string, env []string, dir string) (vfs.Executable, error) {
	return p.c.lookPath(name, env, dir)
}

// AddWorker adds a child process to the table (a server's worker), named
// name, running as id; end removes it.
func (p *Proc) AddWorker(argv []string, id Identity, name string) (end func(), err error) {
	w, err := p.c.newTask(p.t, argv, id)
	if err != nil {
		return nil, err
	}
	w.setName(name)
	return func() { w.exit(0) }, nil
}

// Fork is fork(2) for the shell: a child process running the same program,
// with its own table entry, that shares everything else.
func (p *Proc) Fork() (*Proc, error) {
	t, err := p.c.newTask(p.t, p.Args, p.t.id)
	if err != nil {
		return nil, err
	}
	child := *p
	child.t = t
	child.th = p.c.cpu.NewThread()
	return &child, nil
}

// Execve replaces the caller's program (execve(2)): the task takes args as
// its argv, and the returned proc is what runs in it, exe with args, env and
// dir on sio. The caller runs it or leaves it in Next.
func (p *Proc) Execve(exe vfs.Executable, args, env []string, dir string, sio Stdio) *Proc {
	p.t.execAs(args, p.t.id.execIdentity(exe))
	p.t.chargeImage(args, env)
	next := &Proc{t: p.t, c: p.c, th: p.th, Args: args, Env: env, Dir: dir, TTY: p.TTY, Exe: exe}
	next.SetStdio(sio)
	return next
}

// ReservePid takes a pid slot of the container's pids limit for a process
// the shell forks without a table entry (a pipeline element); ReleasePid
// gives it back.
func (p *Proc) ReservePid() error { return p.c.fork() }

// ReleasePid gives back a slot ReservePid took.
func (p *Proc) ReleasePid() { p.c.release() }

// Logf reports a defect of the simulation (Spec.Logf).
func (p *Proc) Logf(format string, args ...any) { p.c.logf(format, args...) }

// Identity is who the caller runs as.
func (p *Proc) Identity() Identity { return p.t.id }

// Pid is the caller's pid in its namespace; PPid its parent's.
func (p *Proc) Pid() int { return p.t.pid }

// PPid is the caller's parent's pid.
func (p *Proc) PPid() int { return p.t.ppid }

// Argv is a copy of the caller's argv as the process table shows it.
func (p *Proc) Argv() []string { return p.t.argvCopy() }

// SetArgv changes the caller's argv in the process table (setproctitle).
func (p *Proc) SetArgv(argv []string) { p.t.setArgv(argv) }

// SetSignalHandler installs h for the caller's signals: h reports whether it
// handled sig (nil: default actions).
func (p *Proc) SetSignalHandler(h func(sig syscall.Signal) bool) { p.t.setHandler(h) }

// RecoverCrash, deferred, ends the caller with CrashExitCode when its code
// panics, and reports the defect.
func (p *Proc) RecoverCrash() {
	if r := recover(); r != nil {
		p.t.crashed(r)
	}
}

// Applet is the applet called name in the container's table.
func (p *Proc) Applet(name string) (AppletFunc, bool) { return p.c.applets.Lookup(name) }

// InlineApplet is the applet called name when the shell runs it without a
// process of its own.
func (p *Proc) InlineApplet(name string) (AppletFunc, bool) { return p.c.applets.Inline(name) }

// BusyboxApplets lists the applets of the busybox image's /bin.
func (p *Proc) BusyboxApplets() []string { return p.c.applets.Busybox() }

// FS is the container's file system view; reads go to it directly, writes
// through the calls above.
func (p *Proc) FS() *vfs.FS { return p.c.fs }

// Exit ends the caller's process with code, or with the code of the signal
// that ended its context (128+N), and returns the code it exited with.
func (p *Proc) Exit(code int) int {
	if ec, ok := ExitCause(p.t.ctx); ok {
		code = ec
	}
	p.t.exit(code)
	return code
}

func (c *container) getHostname() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostname
}

// Chown changes path's owner and group as the caller (chown(2), lchown(2)
// when follow is false; -1 leaves one as it is): changing the owner, or the
// group to one the caller is not in, needs CAP_CHOWN.
func (p *Proc) Chown(path string, uid, gid int, follow bool) error {
	name := "chown"
	if !follow {
		name = "lchown"
	}
	if stop, err := p.seccomp(name, unknownArg, intArg(uid), intArg(gid)); stop {
		return err
	}
	c := p.Cred()
	c.Chown = p.t.id.capable(CapChown)
	return p.c.fs.ChownAs(c, path, uid, gid, follow)
}

// Mknod makes a special file as the caller (mknod(2)): a block or character
// device needs CAP_MKNOD; a FIFO does not (see vfs.MknodAs for what the node
// then does).
func (p *Proc) Mknod(path string, mode fs.FileMode) error {
	if stop, err := p.seccomp("mknod", unknownArg, modeArg(mode), unknownArg); stop {
		return err
	}
	if mode&fs.ModeDevice != 0 {
		if err := p.need(CapMknod); err != nil {
			return &fs.PathError{Op: "mknod", Path: path, Err: err}
		}
	}
	return p.c.fs.MknodAs(p.Cred(), path, mode)
}
