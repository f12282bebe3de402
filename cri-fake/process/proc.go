package process

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// proc is what an applet runs with: its task, arguments, environment, working
// directory and stdio.
type proc struct {
	t      *task
	c      *container
	args   []string
	env    []string
	dir    string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tty    bool
	exe    vfs.Executable
	// next is the program this one exec'd (the shell's exec builtin): it runs in the same
	// process once this one has returned; inherited are the files the shell redirected for
	// it, closed when it ends.
	next      *proc
	inherited []io.Closer
}

// applet is what runs an executable: its exit code (see applettable.go).
type applet func(p *proc) int

// Applets lists the applet names an image's executables may run.
func Applets() []string { return appletTable().names() }

func base(p string) string { return path.Base(p) }

func (p *proc) ctx() context.Context { return p.t.ctx }

func (p *proc) cred() vfs.Cred { return p.t.id.cred() }

func (p *proc) name() string { return base(p.args[0]) }

// abs resolves a path against the working directory; /proc/self is the caller.
func (p *proc) abs(q string) string { return p.absIn(p.dir, q) }

func (p *proc) absIn(dir, q string) string {
	if !strings.HasPrefix(q, "/") {
		q = dir + "/" + q
	}
	q = path.Clean(q)
	for _, self := range []string{"/proc/self", "/proc/thread-self"} {
		if q == self || strings.HasPrefix(q, self+"/") {
			q = "/proc/" + strconv.Itoa(p.t.pid) + strings.TrimPrefix(q, self)
		}
	}
	return q
}

func (p *proc) errorf(format string, args ...any) {
	fmt.Fprintf(p.stderr, p.name()+": "+format+"\n", args...)
}

func (p *proc) getenv(k string) string { return envGet(p.env, k) }

// maxInterpreters is how many "#!" interpreters one exec may go through before it fails with
// ELOOP (the kernel's BINPRM_MAX_RECURSION, 4): a script naming itself as its interpreter.
const maxInterpreters = 4

// runExecutable runs the resolved executable and then, as long as the program
// ended by exec'ing another (the shell's exec builtin sets next), that one in
// the same process. It loops instead of recursing, so a script that execs
// itself forever runs in bounded memory, as it does on a kernel.
func (p *proc) runExecutable() int {
	cur := p
	for {
		code := cur.runImage()
		closeAll(cur.inherited)
		cur.inherited = nil
		next := cur.next
		if next == nil {
			return code
		}
		cur.next = nil
		cur = next
	}
}

// runImage runs one program: an applet, or a "#!" script through its interpreter.
func (p *proc) runImage() int {
	program := p.exe.Path
	for hops := 0; p.exe.Script != nil; hops++ {
		if hops == maxInterpreters {
			// What busybox sh prints when execve fails with ELOOP.
			fmt.Fprintf(p.stderr, "sh: %s: Too many levels of symbolic links\n", program)
			return 127
		}
		line, _, _ := bytes.Cut(p.exe.Script, []byte("\n"))
		fields := strings.Fields(strings.TrimPrefix(string(line), "#!"))
		if len(fields) == 0 {
			fields = []string{"/bin/sh"}
		}
		args := append(fields, p.exe.Path)
		args = append(args, p.args[1:]...)
		exe, err := p.c.lookPath(fields[0], p.env, p.dir)
		if err != nil {
			p.errorf("%v", err)
			return 127
		}
		p.args, p.exe = args, exe
	}
	name := p.exe.Applet
	if name == "busybox" && base(p.args[0]) != "busybox" {
		name = base(p.args[0])
	}
	a, ok := p.c.applets.lookup(name)
	if !ok {
		p.errorf("applet not found")
		return 127
	}
	return a(p)
}

// spawn runs exe as a child process of p (a new process table entry) and
// waits for it when fg is set. It fails only with EAGAIN, fork's error when
// the container is at its pids limit.
func (p *proc) spawn(exe vfs.Executable, args, env []string, dir string, sio io3, fg bool) (int, error) {
	return p.spawnIn(false, exe, args, env, dir, sio, fg)
}

// spawnIn is spawn; with held the child takes over a pid slot the caller holds (see newTaskIn).
func (p *proc) spawnIn(held bool, exe vfs.Executable, args, env []string, dir string, sio io3, fg bool) (int, error) {
	t, err := p.c.newTaskIn(p.t, args, p.t.id, held)
	if err != nil {
		return 0, err
	}
	if fg {
		p.t.addFg(t)
		defer p.t.removeFg(t)
	}
	child := &proc{t: t, c: p.c, args: args, env: env, dir: dir, stdin: sio.in, stdout: sio.out, stderr: sio.err, tty: p.tty, exe: exe}
	done := make(chan int, 1)
	go func() {
		defer t.recoverCrash()
		done <- child.runExecutable()
	}()
	var code int
	select {
	case code = <-done:
	case <-t.ctx.Done():
	}
	if ec, ok := exitCause(t.ctx); ok {
		code = ec
	}
	t.exit(code)
	return code, nil
}

// errForkText is how busybox prints fork's EAGAIN (strerror).
const errForkText = "Resource temporarily unavailable"

// runArgs resolves and runs args as a child (env, nice-style wrappers).
func (p *proc) runArgs(args, env []string) int {
	exe, err := p.c.lookPath(args[0], env, p.dir)
	if err != nil {
		p.errorf("can't execute '%s': No such file or directory", args[0])
		return 127
	}
	code, err := p.spawn(exe, args, env, p.dir, io3{p.stdin, p.stdout, p.stderr}, true)
	if err != nil {
		p.errorf("can't execute '%s': %s", args[0], errForkText)
		return 126
	}
	return code
}
