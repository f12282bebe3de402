package kernel

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/sched"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// proc is what an applet runs with: its task, arguments, environment, working
// directory and stdio.
type Proc struct {
	t      *task
	c      *container
	th     *sched.Thread // the goroutine running it, as the CPU scheduler sees it (cpu.go)
	Args   []string
	Env    []string
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
	Exe    vfs.Executable
	// next is the program this one exec'd (the shell's exec builtin): it runs in the same
	// process once this one has returned; inherited are the files the shell redirected for
	// it, closed when it ends.
	Next      *Proc
	Inherited []io.Closer
	// elapsed is how long the program had already run when the simulation began running it: a
	// dormant main process woken up late (Spec.StartedAt); 0 otherwise.
	elapsed time.Duration
}

// Elapsed is how long this program had already run before the simulation began running it
// (a dormant main process, Spec.StartedAt), which a program that only waits (sleep) counts as
// waited; 0 for every other program.
func (p *Proc) Elapsed() time.Duration { return p.elapsed }

// io3 is a process's standard input, output and error.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// applet is what runs an executable: its exit code (see applettable.go).
type AppletFunc func(p *Proc) int

func base(p string) string { return path.Base(p) }

func (p *Proc) Ctx() context.Context { return p.t.ctx }

func (p *Proc) Cred() vfs.Cred { return p.t.id.cred() }

func (p *Proc) Name() string { return base(p.Args[0]) }

// abs resolves a path against the working directory; /proc/self is the caller.
func (p *Proc) Abs(q string) string { return p.AbsIn(p.Dir, q) }

func (p *Proc) AbsIn(dir, q string) string {
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

func (p *Proc) Errorf(format string, args ...any) {
	fmt.Fprintf(p.Stderr, p.Name()+": "+format+"\n", args...)
}

func (p *Proc) Getenv(k string) string { return envGet(p.Env, k) }

// maxInterpreters is how many "#!" interpreters one exec may go through before it fails with
// ELOOP (the kernel's BINPRM_MAX_RECURSION, 4): a script naming itself as its interpreter.
const maxInterpreters = 4

// runExecutable runs the resolved executable and then, as long as the program
// ended by exec'ing another (the shell's exec builtin sets next), that one in
// the same process. It loops instead of recursing, so a script that execs
// itself forever runs in bounded memory, as it does on a kernel.
func (p *Proc) RunExecutable() int {
	cur := p
	for {
		code := cur.runImage()
		CloseAll(cur.Inherited)
		cur.Inherited = nil
		next := cur.Next
		if next == nil {
			return code
		}
		cur.Next = nil
		cur = next
	}
}

// runImage runs one program: an applet, or a "#!" script through its interpreter.
func (p *Proc) runImage() int {
	program := p.Exe.Path
	for hops := 0; p.Exe.Script != nil; hops++ {
		if hops == maxInterpreters {
			// What busybox sh prints when execve fails with ELOOP.
			fmt.Fprintf(p.Stderr, "sh: %s: Too many levels of symbolic links\n", program)
			return 127
		}
		line, _, _ := bytes.Cut(p.Exe.Script, []byte("\n"))
		fields := strings.Fields(strings.TrimPrefix(string(line), "#!"))
		if len(fields) == 0 {
			fields = []string{"/bin/sh"}
		}
		args := append(fields, p.Exe.Path)
		args = append(args, p.Args[1:]...)
		exe, err := p.c.lookPath(fields[0], p.Env, p.Dir)
		if err != nil {
			p.Errorf("%v", err)
			return 127
		}
		p.Args, p.Exe = args, exe
	}
	name := p.Exe.Applet
	if name == "busybox" && base(p.Args[0]) != "busybox" {
		name = base(p.Args[0])
	}
	a, ok := p.c.applets.Lookup(name)
	if !ok {
		p.Errorf("applet not found")
		return 127
	}
	return a(p)
}

// spawn runs exe as a child process of p (a new process table entry) and
// waits for it when fg is set. It fails only with EAGAIN, fork's error when
// the container is at its pids limit.
func (p *Proc) Spawn(exe vfs.Executable, args, env []string, dir string, sio Stdio, fg bool) (int, error) {
	return p.SpawnIn(false, exe, args, env, dir, sio, fg)
}

// spawnIn is spawn; with held the child takes over a pid slot the caller holds (see newTaskIn).
func (p *Proc) SpawnIn(held bool, exe vfs.Executable, args, env []string, dir string, sio Stdio, fg bool) (int, error) {
	t, err := p.c.newTaskIn(p.t, args, p.t.id.execIdentity(exe), held)
	if err != nil {
		return 0, err
	}
	if fg {
		p.t.addFg(t)
		defer p.t.removeFg(t)
	}
	t.chargeImage(args, env)
	child := &Proc{t: t, c: p.c, th: p.c.cpu.NewThread(), Args: args, Env: env, Dir: dir, TTY: p.TTY, Exe: exe}
	child.SetStdio(sio)
	done := make(chan int, 1)
	go func() {
		defer t.recoverCrash()
		defer child.Idle()
		done <- child.RunExecutable()
	}()
	p.Idle() // the parent waits: its CPU is the child's
	var code int
	select {
	case code = <-done:
	case <-t.ctx.Done():
	}
	if ec, ok := ExitCause(t.ctx); ok {
		code = ec
	}
	t.exit(code)
	return code, nil
}

// errForkText is how busybox prints fork's EAGAIN (strerror).
const ErrForkText = "Resource temporarily unavailable"

// runArgs resolves and runs args as a child (env, nice-style wrappers).
func (p *Proc) RunArgs(args, env []string) int {
	exe, err := p.c.lookPath(args[0], env, p.Dir)
	if err != nil {
		p.Errorf("can't execute '%s': No such file or directory", args[0])
		return 127
	}
	code, err := p.Spawn(exe, args, env, p.Dir, Stdio{p.Stdin, p.Stdout, p.Stderr}, true)
	if err != nil {
		p.Errorf("can't execute '%s': %s", args[0], ErrForkText)
		return 126
	}
	return code
}

// maxHeldBytes is the most the shell or an applet holds in memory of one thing it reads or
// builds whole: a line (cut, grep, read, an interactive shell's), an input read to its end (sort,
// tail, a script, a . file), a command substitution's output, an expanded word. busybox would
// hold any size, as far as the container's memory limit lets it (then the OOM killer ends it);
// cri-fake's memory is every container's, so past 16 MiB the applet fails ("line too long",
// "out of memory") instead.
const MaxHeldBytes = 16 << 20

var ErrTooBig = errors.New("out of memory")

// readBounded reads r to its end, failing with errTooBig past maxHeldBytes. What it reads is not
// charged to the container's memory: a program that keeps it should read with Held.ReadAll.
func ReadBounded(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxHeldBytes+1))
	if err == nil && len(data) > MaxHeldBytes {
		return nil, ErrTooBig
	}
	return data, err
}

func CloseAll(cs []io.Closer) {
	for _, c := range cs {
		c.Close()
	}
}

// readFileBounded is FS.ReadFile failing with errTooBig past maxHeldBytes (a device such as
// /dev/zero never ends). Not charged either: see Held.ReadFile.
func (p *Proc) ReadFileBounded(name string) ([]byte, error) {
	rc, err := p.FS().Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return ReadBounded(rc)
}

func LineError(err error) string {
	if errors.Is(err, bufio.ErrTooLong) {
		return "line too long"
	}
	if errors.Is(err, ErrTooBig) {
		return err.Error()
	}
	return vfs.Strerror(err)
}
