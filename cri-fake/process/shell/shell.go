package shell

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// sigState is what a shell and its subshells share about signals.
type sigState struct {
	mu      sync.Mutex
	traps   map[string]string // "TERM" -> action ("" = ignore); "EXIT"
	pending chan syscall.Signal
}

type job struct {
	pid  int
	done chan struct{}
	code int
}

// shell interprets the sh subset for one sh process (and its subshells).
type shell struct {
	p        *kernel.Proc
	io       kernel.Stdio
	vars     map[string]string
	exported map[string]bool
	funcs    map[string]*funcDef
	params   []string
	// heldParams: the shell charged params (setParams), rather than a function's command
	heldParams bool
	arg0       string
	dir        string
	rootPid    int
	sub        bool // a subshell: exit ends only it, traps are not run here
	sig        *sigState
	jobs       map[int]*job
	jobsMu     *sync.Mutex
	lastBg     int

	status      int
	substStatus int
	exitReq     bool
	exitCode    int
	retReq      bool
	brk, cont   int
	loopDepth   int
	inCond      int
	errexit     bool
	xtrace      bool
	nounset     bool
	// broken reports that this pipeline element's (or command substitution's) output has no
	// reader any more: the element stops, as SIGPIPE would end a forked subshell.
	broken    interface{ Broken() bool }
	ignoreInt *atomic.Bool

	// nest is how many function calls, eval, . scripts, trap actions and command
	// substitutions run inside each other here (see maxNest).
	nest   int
	inTrap bool
	// aborted is set when a shell error (see abort) ended what the shell was running: an
	// interactive shell then goes back to its prompt instead of exiting.
	aborted bool
	// heldSlot: this pipeline subshell holds a pid slot, which the first command it spawns
	// takes over (ash forks the element and execs its command there: one process, not two).
	heldSlot bool
	// execTail: this background job is one simple command, which replaces the job's shell
	// when it is external (ash's forked child execs it), so $! is that command's pid.
	execTail bool
}

// maxNest bounds how deeply function calls, eval, . (source), trap actions and command
// substitutions nest in one shell, and how deeply the parser, arithmetic and test nest. busybox
// ash has no such limit and dies of a stack overflow (SIGSEGV); in cri-fake that overflow would
// be fatal to the whole runtime, so the shell stops at 1000 levels the way bash does with
// FUNCNEST=1000 (EVALNEST, SOURCENEST likewise): "sh: f: maximum function nesting level exceeded
// (1000)", and the shell ends with status 1 (an interactive one goes back to its prompt).
const MaxNest = 1000

// enter counts one more level of nesting of kind ("function", "eval", "source") for name; at
// maxNest it reports the error, aborts the shell and returns false. leave undoes it.
func (s *shell) enter(sio kernel.Stdio, name, kind string) bool {
	if s.nest >= MaxNest {
		fmt.Fprintf(sio.Err, "%s: %s: maximum %s nesting level exceeded (%d)\n", s.arg0, name, kind, MaxNest)
		s.abort(1)
		return false
	}
	s.nest++
	return true
}

func (s *shell) leave() { s.nest-- }

// abort is a shell error (ash's raise_error): the commands being run stop and a
// non-interactive shell exits with code; an interactive one returns to its prompt.
func (s *shell) abort(code int) {
	s.exitReq, s.exitCode, s.status = true, code, code
	s.aborted = true
}

// forkFailed is ash's "can't fork" when the container is at its pids limit: a shell error.
func (s *shell) forkFailed(sio kernel.Stdio) int {
	fmt.Fprintf(sio.Err, "%s: can't fork: %s\n", s.arg0, kernel.ErrForkText)
	s.abort(2)
	return 2
}

func newShell(p *kernel.Proc) *shell {
	s := &shell{
		p: p, io: kernel.Stdio{In: p.Stdin, Out: p.Stdout, Err: p.Stderr},
		vars: map[string]string{}, exported: map[string]bool{}, funcs: map[string]*funcDef{},
		arg0: p.Args[0], dir: p.Dir, rootPid: p.Pid(),
		sig:  &sigState{traps: map[string]string{}, pending: make(chan syscall.Signal, 16)},
		jobs: map[int]*job{}, jobsMu: &sync.Mutex{}, ignoreInt: &atomic.Bool{},
	}
	for _, kv := range p.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			s.setVar(k, v)
			s.export(k, true)
		}
	}
	if _, ok := s.vars["PWD"]; !ok {
		s.setVar("PWD", s.dir)
	}
	s.setVar("PPID", strconv.Itoa(p.PPid()))
	s.setVar("IFS", " \t\n")
	p.SetSignalHandler(s.onSignal)
	return s
}

func (s *shell) subshell() *shell {
	c := *s
	c.vars = make(map[string]string, len(s.vars))
	for k, v := range s.vars {
		c.vars[k] = v
	}
	c.exported = make(map[string]bool, len(s.exported))
	for k, v := range s.exported {
		c.exported[k] = v
	}
	c.funcs = make(map[string]*funcDef, len(s.funcs))
	for k, v := range s.funcs {
		c.funcs[k] = v
	}
	c.params = append([]string(nil), s.params...)
	c.chargeCopy() // released when the subshell ends (release)
	c.sub = true
	c.heldSlot, c.execTail = false, false
	c.exitReq, c.retReq, c.brk, c.cont = false, false, 0, 0
	return &c
}

// onSignal runs in the signalling goroutine: a trapped signal is queued and
// its action runs between commands; an ignored one is dropped.
func (s *shell) onSignal(sig syscall.Signal) bool {
	if sig == syscall.SIGINT && s.ignoreInt.Load() {
		return true // an interactive shell survives ^C; its foreground command does not
	}
	name := kernel.SignalName(sig)
	s.sig.mu.Lock()
	action, ok := s.sig.traps[name]
	s.sig.mu.Unlock()
	if !ok {
		return false
	}
	if action != "" {
		select {
		case s.sig.pending <- sig:
		default:
		}
	}
	return true
}

// runPendingTraps runs the actions of trapped signals that arrived.
func (s *shell) runPendingTraps() {
	if s.sub || s.inTrap {
		// A signal that arrives while its trap runs waits for the trap to end (as in bash
		// and ash), so a trap that raises its own signal loops instead of recursing.
		return
	}
	s.inTrap = true
	defer func() { s.inTrap = false }()
	for {
		select {
		case sig := <-s.sig.pending:
			s.sig.mu.Lock()
			action := s.sig.traps[kernel.SignalName(sig)]
			s.sig.mu.Unlock()
			if action == "" {
				continue
			}
			saved := s.status
			s.evalString(action, s.io)
			if !s.exitReq {
				s.status = saved
			}
		default:
			return
		}
	}
}

func (s *shell) runExitTrap(sio kernel.Stdio) {
	if s.sub {
		return
	}
	s.sig.mu.Lock()
	action, ok := s.sig.traps["EXIT"]
	s.setTrap("EXIT", "", true)
	s.sig.mu.Unlock()
	if ok && action != "" {
		saved := s.exitReq
		s.exitReq = false
		code := s.exitCode
		s.evalString(action, sio)
		if !s.exitReq {
			s.exitReq, s.exitCode = saved, code
		}
	}
}

func (s *shell) evalString(src string, sio kernel.Stdio) int {
	if err := s.runScript(src, sio); err != nil {
		fmt.Fprintf(sio.Err, "%s: %v\n", s.arg0, err)
		s.status = 2
		return 2
	}
	return s.status
}

// runScript runs src a line at a time (parser.line), each line's tree charged while it runs; a
// syntax error ends it after the lines before it ran, as in ash. It returns the syntax error.
func (s *shell) runScript(src string, sio kernel.Stdio) error {
	ps := newParser(src, s.p.Held())
	defer ps.lx.mem.Release()
	l, err := ps.line()
	if err != nil {
		return err
	}
	return s.runLines(ps, l, sio)
}

// runLines runs l, then the lines ps parses after it, until the script ends or stops.
func (s *shell) runLines(ps *parser, l *list, sio kernel.Stdio) error {
	for l != nil && !s.stopped() {
		s.runList(l, sio)
		ps.lx.mem.Release() // the line's tree (a function defined in it is charged on its own)
		var err error
		if l, err = ps.line(); err != nil {
			return err
		}
	}
	return nil
}

func (s *shell) lookup(name string) (string, bool) {
	v, ok := s.vars[name]
	if !ok && name == "RANDOM" {
		// ash's dynamic $RANDOM (ASH_RANDOM_SUPPORT): 0..32767, a new one at each read. An
		// assignment makes it a plain variable here (ash would reseed).
		return strconv.Itoa(rand.IntN(32768)), true
	}
	return v, ok
}

func (s *shell) stopped() bool {
	return s.exitReq || s.retReq || s.brk > 0 || s.cont > 0 || s.p.Ctx().Err() != nil || (s.broken != nil && s.broken.Broken())
}

func (s *shell) runList(l *list, sio kernel.Stdio) int {
	for i, ao := range l.items {
		if s.stopped() {
			break
		}
		if l.async[i] {
			s.background(ao, sio)
			s.status = 0
		} else {
			s.status = s.runAndOr(ao, sio)
		}
		s.runPendingTraps()
	}
	return s.status
}

func (s *shell) background(ao *andOr, sio kernel.Stdio) {
	sub := s.subshell()
	// A background job is a forked shell: its own process table entry, so
	// `kill $!` ends it (and whatever it runs).
	child, err := s.p.Fork()
	if err != nil {
		s.forkFailed(sio)
		return
	}
	sub.p = child
	pl := ao.first
	if _, simple := pl.cmds[0].(*simpleCmd); simple && len(ao.rest) == 0 && !pl.bang && len(pl.cmds) == 1 {
		sub.execTail = true
	}
	sub.io = kernel.Stdio{In: strings.NewReader(""), Out: sio.Out, Err: sio.Err}
	j := &job{pid: child.Pid(), done: make(chan struct{})}
	s.jobsMu.Lock()
	if len(s.jobs) >= rememberedJobs {
		s.forgetFinishedJobs()
	}
	s.jobs[child.Pid()] = j
	s.jobsMu.Unlock()
	s.lastBg = child.Pid()
	finished := make(chan int, 1)
	go func() {
		defer child.RecoverCrash()
		defer child.Idle()
		defer sub.release()
		finished <- sub.runAndOr(ao, sub.io)
	}()
	go func() {
		var code int
		select {
		case code = <-finished:
			if sub.exitReq {
				code = sub.exitCode
			}
		case <-child.Ctx().Done():
		}
		code = child.Exit(code)
		j.code = code
		close(j.done)
	}()
}

// rememberedJobs bounds the jobs table: `while :; do true & done` would otherwise keep one entry
// per job forever. Once it is full, the oldest finished jobs are forgotten, keeping the
// rememberedJobs/2 newest; POSIX asks a shell to remember at least CHILD_MAX (25) statuses for
// wait. Running jobs are never forgotten (the pids limit bounds them).
const rememberedJobs = 1024

// forgetFinishedJobs drops the oldest finished jobs (jobsMu held).
func (s *shell) forgetFinishedJobs() {
	var done []int
	for pid, j := range s.jobs {
		select {
		case <-j.done:
			done = append(done, pid)
		default:
		}
	}
	sort.Ints(done)
	for _, pid := range done[:max(0, len(done)-rememberedJobs/2)] {
		delete(s.jobs, pid)
	}
}

func (s *shell) runAndOr(ao *andOr, sio kernel.Stdio) int {
	condDepth := s.inCond
	if len(ao.rest) > 0 {
		s.inCond++
	}
	st := s.runPipeline(ao.first, sio)
	s.status = st
	ranLast := len(ao.rest) == 0
	for i, op := range ao.ops {
		if s.stopped() {
			break
		}
		if (op == "&&" && st != 0) || (op == "||" && st == 0) {
			continue
		}
		if i == len(ao.ops)-1 {
			s.inCond = condDepth
			ranLast = true
		}
		st = s.runPipeline(ao.rest[i], sio)
		s.status = st
	}
	s.inCond = condDepth
	// set -e: only a failure of the last command of an && || list exits.
	if s.errexit && st != 0 && ranLast && s.inCond == 0 && !s.exitReq {
		s.exitReq, s.exitCode = true, st
	}
	return st
}

func (s *shell) runPipeline(pl *pipeline, sio kernel.Stdio) int {
	if pl.bang {
		s.inCond++
		defer func() { s.inCond-- }()
	}
	var st int
	if len(pl.cmds) == 1 {
		st = s.runCommand(pl.cmds[0], sio)
	} else {
		st = s.runPipe(pl.cmds, sio)
	}
	if pl.bang {
		st = int(b2i(st == 0))
	}
	return st
}

// runPipe runs each command of a pipeline in a subshell, connected by pipes.
// When a reader ends, its pipe is closed so the writer gets EPIPE, as head(1)
// ends an endless producer.
func (s *shell) runPipe(cmds []command, sio kernel.Stdio) int {
	n := len(cmds)
	// ash forks a subshell for every element: each takes a pid slot while it runs, so a
	// pipeline cannot fork past the pids limit (`f() { f | f; }; f` would double forever).
	for i := range cmds {
		if err := s.p.ReservePid(); err != nil {
			for range i {
				s.p.ReleasePid()
			}
			return s.forkFailed(sio)
		}
	}
	codes := make([]int, n)
	var wg sync.WaitGroup
	in := sio.In
	for i, c := range cmds {
		cio := kernel.Stdio{In: in, Out: sio.Out, Err: sio.Err}
		var pw *kernel.PipeWriter
		var pr *kernel.PipeReader
		sub := s.subshell()
		sub.p = s.p.NewThread() // the element runs beside the others
		sub.heldSlot = true
		if i < n-1 {
			pr, pw = kernel.Pipe()
			sub.broken = pw
			cio.Out = pw
			in = pr
		}
		cio = sub.p.Bind(cio)
		wg.Add(1)
		go func(i int, c command, cio kernel.Stdio, pw *kernel.PipeWriter, myIn io.Reader) {
			defer wg.Done()
			defer sub.p.Idle()
			defer sub.release()
			defer func() {
				if sub.heldSlot {
					s.p.ReleasePid() // no command took it over
				}
			}()
			defer func() {
				if pw != nil {
					pw.Close()
				}
				if r, ok := myIn.(*kernel.PipeReader); ok && i > 0 {
					r.CloseWithError(syscall.EPIPE)
				}
			}()
			// The element is a forked subshell of its own: a defect in it ends that
			// subshell with 139 (SIGSEGV), not the shell or cri-fake.
			defer func() {
				if r := recover(); r != nil {
					s.p.Logf("process: pid %d %q: a pipeline subshell crashed on a defect of the simulation and ends with exit code %d: %v\n%s",
						s.p.Pid(), s.p.Argv(), kernel.CrashExitCode, r, debug.Stack())
					codes[i] = kernel.CrashExitCode
				}
			}()
			codes[i] = sub.runCommand(c, cio)
			if sub.exitReq {
				codes[i] = sub.exitCode
			}
		}(i, c, cio, pw, cio.In)
	}
	s.p.Idle() // the shell waits for its elements
	wg.Wait()
	return codes[n-1]
}

func (s *shell) runCommand(c command, sio kernel.Stdio) int {
	// Each command is a step of the shell's work: it may wait here for a CPU (kernel/cpu.go),
	// so a busy loop shares them with every other process of the node.
	if s.p.Step() != nil {
		return s.status
	}
	switch c := c.(type) {
	case *simpleCmd:
		return s.runSimple(c, sio)
	case *funcDef:
		s.setFunc(c)
		return 0
	case *compound:
		mem := s.p.Held() // its here-documents
		defer mem.Release()
		rio, closers, err := s.redirect(c.redirs, sio, mem)
		if err != nil {
			return s.redirectFailed(sio, err)
		}
		defer s.closeAll(closers)
		return s.runCompound(c.cmd, rio)
	}
	return 0
}

// redirectFailed reports a redirection that could not be made: the command fails with 1, or,
// for a syntax error in a here-document (which ash finds while parsing), the shell aborts with 2.
func (s *shell) redirectFailed(sio kernel.Stdio, err error) int {
	fmt.Fprintf(sio.Err, "%s: %v\n", s.arg0, err)
	var se *syntaxError
	if errors.As(err, &se) {
		s.abort(2)
		return 2
	}
	return 1
}

// closeAll closes the files of a redirection once its command is done; when the shell exec'd a
// program meanwhile, the program owns them (an exec'd process inherits its file descriptors).
func (s *shell) closeAll(cs []io.Closer) {
	if s.p.Next != nil {
		s.p.Next.Inherited = append(s.p.Next.Inherited, cs...)
		return
	}
	kernel.CloseAll(cs)
}

func (s *shell) runCompound(c command, sio kernel.Stdio) int {
	switch c := c.(type) {
	case *groupCmd:
		if c.subshell {
			sub := s.subshell()
			defer sub.release()
			st := sub.runList(c.body, sio)
			if sub.exitReq {
				st = sub.exitCode
			}
			return st
		}
		return s.runList(c.body, sio)
	case *ifCmd:
		for i, cond := range c.conds {
			s.inCond++
			st := s.runList(cond, sio)
			s.inCond--
			if s.stopped() {
				return st
			}
			if st == 0 {
				return s.runList(c.bodies[i], sio)
			}
		}
		if c.els != nil {
			return s.runList(c.els, sio)
		}
		return 0
	case *loopCmd:
		st := 0
		s.loopDepth++
		defer func() { s.loopDepth-- }()
		for {
			s.inCond++
			cst := s.runList(c.cond, sio)
			s.inCond--
			if s.exitReq || s.retReq || s.p.Ctx().Err() != nil {
				return st
			}
			if s.brk > 0 {
				s.brk--
				return st
			}
			if (cst == 0) == c.until {
				return st
			}
			st = s.runList(c.body, sio)
			if s.loopEnds() {
				return st
			}
		}
	case *forCmd:
		var items []string
		if c.inSet {
			mem := s.p.Held() // the list, while the loop runs
			defer mem.Release()
			var err error
			items, err = s.expandWords(c.words)
			if err == nil && holdFields(mem, items) != nil {
				err = errOutOfMemory
			}
			if err != nil {
				fmt.Fprintf(sio.Err, "%s: %v\n", s.arg0, err)
				return 1
			}
		} else {
			items = append(items, s.params...)
		}
		st := 0
		s.loopDepth++
		defer func() { s.loopDepth-- }()
		for _, it := range items {
			s.setVar(c.name, it)
			st = s.runList(c.body, sio)
			if s.loopEnds() {
				return st
			}
		}
		return st
	case *caseCmd:
		w, err := s.expandString(c.word)
		if err != nil {
			fmt.Fprintf(sio.Err, "%s: %v\n", s.arg0, err)
			return 1
		}
		for _, it := range c.items {
			for _, pat := range it.patterns {
				pb := s.newBuilder()
				err := s.expand(pat, pb, false)
				matched := err == nil && pb.matches(w)
				pb.release()
				if err != nil {
					return 1
				}
				if matched {
					return s.runList(it.body, sio)
				}
			}
		}
		return 0
	}
	return 0
}

// redirect applies redirections and returns the new stdio and what to close; the bodies of
// here-documents are charged to mem (they are held until the command ends).
func (s *shell) redirect(rs []redir, sio kernel.Stdio, mem *kernel.Held) (kernel.Stdio, []io.Closer, error) {
	if len(rs) == 0 && sio.In != nil && sio.Out != nil && sio.Err != nil {
		return sio, nil, nil
	}
	var closers []io.Closer
	fds := map[int]any{0: sio.In, 1: sio.Out, 2: sio.Err}
	for _, r := range rs {
		if r.here != nil {
			body := r.here.body
			if !r.here.quoted {
				b := s.newBuilder()
				err := s.expandDouble(body, b)
				body = b.curString()
				b.release()
				if err == nil && mem.Grow(int64(len(body))) != nil {
					err = errOutOfMemory
				}
				if err != nil {
					kernel.CloseAll(closers)
					return sio, nil, err
				}
			}
			fds[r.fd] = strings.NewReader(body)
			continue
		}
		target, err := s.expandString(r.target)
		if err != nil {
			kernel.CloseAll(closers)
			return sio, nil, err
		}
		switch r.op {
		case ">&", "<&":
			if target == "-" {
				fds[r.fd] = nil
				continue
			}
			src, err := strconv.Atoi(target)
			if err != nil || fds[src] == nil {
				if r.op == ">&" && err != nil {
					// >&file is &>file in busybox ash.
					w, werr := s.openOut(target, false)
					if werr != nil {
						kernel.CloseAll(closers)
						return sio, nil, werr
					}
					closers = append(closers, w)
					fds[1], fds[2] = w, w
					continue
				}
				kernel.CloseAll(closers)
				return sio, nil, fmt.Errorf("%s: bad file descriptor", target)
			}
			fds[r.fd] = fds[src]
		case "<", "<>":
			rc, err := s.p.FS().Open(s.p.AbsIn(s.dir, target))
			if err != nil {
				kernel.CloseAll(closers)
				return sio, nil, fmt.Errorf("can't open '%s': %s", target, vfs.Strerror(err))
			}
			closers = append(closers, rc)
			fds[r.fd] = rc
		case ">", ">|", ">>", "&>":
			if target == "/dev/stdout" || target == "/dev/stderr" {
				fd := 1
				if target == "/dev/stderr" {
					fd = 2
				}
				fds[r.fd] = fds[fd]
				if r.op == "&>" {
					fds[2] = fds[fd]
				}
				continue
			}
			w, err := s.openOut(target, r.op == ">>")
			if err != nil {
				kernel.CloseAll(closers)
				return sio, nil, err
			}
			closers = append(closers, w)
			fds[r.fd] = w
			if r.op == "&>" {
				fds[2] = w
			}
		}
	}
	out := kernel.Stdio{}
	if r, ok := fds[0].(io.Reader); ok {
		out.In = r
	} else {
		out.In = strings.NewReader("")
	}
	if w, ok := fds[1].(io.Writer); ok {
		out.Out = w
	} else {
		out.Out = vfs.Discard{}
	}
	if w, ok := fds[2].(io.Writer); ok {
		out.Err = w
	} else {
		out.Err = vfs.Discard{}
	}
	return out, closers, nil
}

func (s *shell) openOut(target string, appendMode bool) (io.WriteCloser, error) {
	w, err := s.p.OpenWrite(s.p.AbsIn(s.dir, target), appendMode, 0o644)
	if err != nil {
		return nil, fmt.Errorf("can't create %s: %s", target, vfs.Strerror(err))
	}
	return w, nil
}

// exportedEnv is the environment passed to commands.
func (s *shell) exportedEnv(extra []string) []string {
	keys := make([]string, 0, len(s.exported))
	for k, ok := range s.exported {
		if _, set := s.vars[k]; ok && set {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys)+len(extra))
	for _, k := range keys {
		env = append(env, k+"="+s.vars[k])
	}
	return append(env, extra...)
}

func (s *shell) runSimple(c *simpleCmd, sio kernel.Stdio) int {
	tail := s.execTail
	s.execTail = false // only this command, not what a function it calls runs
	s.substStatus = -1
	mem := s.p.Held() // what the command holds while it runs: its words, environment, here-documents
	defer mem.Release()
	words, err := s.expandWords(c.words)
	if err == nil && holdFields(mem, words) != nil {
		err = errOutOfMemory
	}
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: %v\n", s.arg0, err)
		if !s.sub || err == errOutOfMemory {
			s.abort(2)
		}
		return 2
	}
	var tmpEnv []string
	for _, a := range c.assigns {
		k, raw, _ := strings.Cut(a, "=")
		v, err := s.expandString(raw)
		if err != nil {
			fmt.Fprintf(sio.Err, "%s: %v\n", s.arg0, err)
			if err == errOutOfMemory {
				s.abort(2) // busybox dies on a failed allocation
				return 2
			}
			return 1
		}
		if len(words) == 0 {
			s.setVar(k, v)
		} else {
			tmpEnv = append(tmpEnv, k+"="+v)
		}
	}
	rio, closers, err := s.redirect(c.redirs, sio, mem)
	if err != nil {
		return s.redirectFailed(sio, err)
	}
	defer s.closeAll(closers)
	if len(words) == 0 {
		if s.substStatus >= 0 {
			return s.substStatus
		}
		return 0
	}
	if s.xtrace {
		fmt.Fprintf(rio.Err, "+ %s\n", strings.Join(words, " "))
	}
	if fn, ok := s.funcs[words[0]]; ok {
		if !s.enter(rio, words[0], "function") {
			return 1
		}
		saved, savedHeld := s.params, s.heldParams
		s.params, s.heldParams = words[1:], false // charged with the command's words
		st := s.runCommand(fn.body, rio)
		s.dropParams() // what a `set --` in the function set
		s.params, s.heldParams = saved, savedHeld
		s.leave()
		if s.retReq {
			s.retReq = false
			st = s.status
		}
		return st
	}
	if b, ok := shellBuiltins[words[0]]; ok {
		return b(s, words, rio)
	}
	if a, ok := s.p.InlineApplet(words[0]); ok {
		bp := *s.p
		bp.Args, bp.Dir = words, s.dir
		bp.SetStdio(rio)
		bp.Env = s.exportedEnv(tmpEnv)
		if holdEnv(mem, bp.Env) != nil {
			return 1 // out of memory: the OOM killer is ending the container
		}
		return a(&bp)
	}
	env := s.exportedEnv(tmpEnv) // the child's, charged with it (kernel: its argv and environment)
	exe, err := s.p.LookPath(words[0], env, s.dir)
	if err != nil {
		return s.execFailed(words[0], err, rio)
	}
	if tail {
		// The background job's shell becomes the command (exec in the forked child).
		return s.p.Execve(exe, words, env, s.dir, rio).RunExecutable()
	}
	held := s.heldSlot
	s.heldSlot = false
	st, err := s.p.SpawnIn(held, exe, words, env, s.dir, rio, true)
	if err != nil {
		return s.forkFailed(rio)
	}
	return st
}

func (s *shell) execFailed(name string, err error, sio kernel.Stdio) int {
	switch {
	case errors.Is(err, kernel.ErrNotFound), errors.Is(err, syscall.ENOENT):
		fmt.Fprintf(sio.Err, "%s: %s: not found\n", s.arg0, name)
		return 127
	case errors.Is(err, syscall.EACCES):
		fmt.Fprintf(sio.Err, "%s: %s: Permission denied\n", s.arg0, name)
		return 126
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		fmt.Fprintf(sio.Err, "%s: %s: %s\n", s.arg0, name, vfs.Strerror(pe.Err))
	} else {
		fmt.Fprintf(sio.Err, "%s: %s: %v\n", s.arg0, name, err)
	}
	return 126
}

type builtin func(s *shell, args []string, sio kernel.Stdio) int

var shellBuiltins map[string]builtin

func init() {
	shellBuiltins = map[string]builtin{
		":":        func(*shell, []string, kernel.Stdio) int { return 0 },
		"cd":       builtinCd,
		"exit":     builtinExit,
		"return":   builtinReturn,
		"break":    builtinBreak,
		"continue": builtinBreak,
		"export":   builtinExport,
		"readonly": builtinExport,
		"local":    builtinLocal,
		"unset":    builtinUnset,
		"set":      builtinSet,
		"shift":    builtinShift,
		"trap":     builtinTrap,
		"read":     builtinRead,
		"wait":     builtinWait,
		"eval":     builtinEval,
		".":        builtinSource,
		"source":   builtinSource,
		"exec":     builtinExec,
		"type":     builtinType,
		"command":  builtinType,
		"umask":    func(s *shell, args []string, sio kernel.Stdio) int { fmt.Fprintln(sio.Out, "0022"); return 0 },
		"pwd":      func(s *shell, args []string, sio kernel.Stdio) int { fmt.Fprintln(sio.Out, s.dir); return 0 },
	}
}

func builtinCd(s *shell, args []string, sio kernel.Stdio) int {
	dir := ""
	if len(args) > 1 {
		dir = args[1]
	} else {
		dir, _ = s.lookup("HOME")
	}
	printDir := false
	if dir == "-" {
		dir, _ = s.lookup("OLDPWD")
		printDir = true // `cd -` prints where it went
	}
	target := s.p.AbsIn(s.dir, dir)
	st, err := s.p.FS().Stat(target)
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: cd: can't cd to %s: %s\n", s.arg0, dir, vfs.Strerror(err))
		return 1
	}
	if !st.IsDir() {
		fmt.Fprintf(sio.Err, "%s: cd: can't cd to %s: Not a directory\n", s.arg0, dir)
		return 1
	}
	s.setVar("OLDPWD", s.dir)
	s.dir = target
	s.setVar("PWD", target)
	if printDir {
		fmt.Fprintln(sio.Out, target)
	}
	return 0
}

func builtinExit(s *shell, args []string, sio kernel.Stdio) int {
	code := s.status
	if len(args) > 1 {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			fmt.Fprintf(sio.Err, "%s: exit: Illegal number: %s\n", s.arg0, args[1])
			code = 2
		} else {
			code = n & 0xff
		}
	}
	s.exitReq, s.exitCode = true, code
	return code
}

func builtinReturn(s *shell, args []string, sio kernel.Stdio) int {
	code := s.status
	if len(args) > 1 {
		code, _ = strconv.Atoi(args[1])
	}
	s.retReq = true
	s.status = code
	return code
}

func builtinBreak(s *shell, args []string, sio kernel.Stdio) int {
	n := 1
	if len(args) > 1 {
		n, _ = strconv.Atoi(args[1])
		if n < 1 {
			n = 1
		}
	}
	if s.loopDepth == 0 {
		return 0
	}
	if n > s.loopDepth {
		n = s.loopDepth
	}
	if args[0] == "break" {
		s.brk = n
	} else {
		s.cont = n
	}
	return 0
}

func builtinExport(s *shell, args []string, sio kernel.Stdio) int {
	if len(args) == 1 || (len(args) == 2 && args[1] == "-p") {
		for _, kv := range s.exportedEnv(nil) {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(sio.Out, "export %s='%s'\n", k, v)
		}
		return 0
	}
	for _, a := range args[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			s.setVar(k, v)
			s.export(k, true)
		} else {
			s.export(a, true)
		}
	}
	return 0
}

func builtinLocal(s *shell, args []string, sio kernel.Stdio) int {
	for _, a := range args[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			s.setVar(k, v)
		} else if _, ok := s.vars[a]; !ok {
			s.setVar(a, "")
		}
	}
	return 0
}

func builtinUnset(s *shell, args []string, sio kernel.Stdio) int {
	for _, a := range args[1:] {
		if a == "-f" || a == "-v" {
			continue
		}
		s.unsetVar(a)
		s.export(a, false)
		s.unsetFunc(a)
	}
	return 0
}

func builtinSet(s *shell, args []string, sio kernel.Stdio) int {
	if len(args) == 1 {
		keys := make([]string, 0, len(s.vars))
		for k := range s.vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(sio.Out, "%s='%s'\n", k, s.vars[k])
		}
		return 0
	}
	rest := args[1:]
	for len(rest) > 0 {
		a := rest[0]
		if a == "--" {
			rest = rest[1:]
			s.setParams(append([]string(nil), rest...))
			return 0
		}
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') {
			break
		}
		on := a[0] == '-'
		if a[1:] == "o" && len(rest) > 1 {
			switch rest[1] {
			case "errexit":
				s.errexit = on
			case "xtrace":
				s.xtrace = on
			case "nounset":
				s.nounset = on
			}
			rest = rest[2:]
			continue
		}
		for _, f := range a[1:] {
			switch f {
			case 'e':
				s.errexit = on
			case 'x':
				s.xtrace = on
			case 'u':
				s.nounset = on
			}
		}
		rest = rest[1:]
	}
	if len(rest) > 0 {
		s.setParams(append([]string(nil), rest...))
	}
	return 0
}

// builtinShift is ash's shift: the count must be digits ("sh: shift: Illegal number: -1" is a
// shell error, status 2), and a count larger than $# shifts nothing and returns 1 without a
// message (busybox 1.36; bash says "shift count out of range", dash "can't shift that many").
func builtinShift(s *shell, args []string, sio kernel.Stdio) int {
	n := 1
	if len(args) > 1 {
		if !isDigits(args[1]) {
			fmt.Fprintf(sio.Err, "%s: shift: Illegal number: %s\n", s.arg0, args[1])
			s.abort(2)
			return 2
		}
		var err error
		if n, err = strconv.Atoi(args[1]); err != nil {
			return 1 // more than any shell can have
		}
	}
	if n > len(s.params) {
		return 1
	}
	s.shift(n)
	return 0
}

func builtinTrap(s *shell, args []string, sio kernel.Stdio) int {
	s.sig.mu.Lock()
	defer s.sig.mu.Unlock()
	if len(args) == 1 {
		names := make([]string, 0, len(s.sig.traps))
		for k := range s.sig.traps {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(sio.Out, "trap -- '%s' %s\n", s.sig.traps[k], k)
		}
		return 0
	}
	action := args[1]
	sigs := args[2:]
	if len(args) == 2 {
		// "trap N": with only signals, reset them.
		action, sigs = "-", args[1:]
	}
	for _, name := range sigs {
		key := strings.TrimPrefix(strings.ToUpper(name), "SIG")
		if key == "0" || key == "EXIT" {
			key = "EXIT"
		} else {
			sig, ok := kernel.ParseSignal(name)
			if !ok {
				fmt.Fprintf(sio.Err, "%s: trap: %s: bad trap\n", s.arg0, name)
				return 1
			}
			key = kernel.SignalName(sig)
		}
		s.setTrap(key, action, action == "-")
	}
	return 0
}

// lineReader reads one byte at a time so it never consumes input meant for
// the next reader of the same stream (an interactive shell's commands). A
// line longer than maxHeldBytes fails with errTooBig.
// The line is charged to mem (nil: uncharged) until the caller releases it.
type lineReader struct {
	r   io.Reader
	mem *kernel.Held
}

func (l lineReader) readLine() (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := l.r.Read(one)
		if n == 1 {
			if len(b) == kernel.MaxHeldBytes {
				return "", kernel.ErrTooBig
			}
			if l.mem.Grow(1) != nil {
				return "", kernel.ErrTooBig // out of memory: the OOM killer is ending the container
			}
			b = append(b, one[0])
			if one[0] == '\n' {
				return string(b), nil
			}
		}
		if err != nil {
			return string(b), err
		}
	}
}

func builtinRead(s *shell, args []string, sio kernel.Stdio) int {
	raw := false
	var names []string
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "-r":
			raw = true
		case "-p":
			if i+1 < len(args) {
				fmt.Fprint(sio.Err, args[i+1])
				i++
			}
		default:
			names = append(names, args[i])
		}
	}
	if len(names) == 0 {
		names = []string{"REPLY"}
	}
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		defer s.p.RecoverCrash()
		mem := s.p.Held() // the line while it is read (its goroutine's own: it may outlive read)
		defer mem.Release()
		line, err := lineReader{sio.In, mem}.readLine()
		ch <- res{line, err}
	}()
	s.p.Idle()
	var r res
	select {
	case r = <-ch:
	case <-s.p.Ctx().Done():
		return 1
	}
	if errors.Is(r.err, kernel.ErrTooBig) {
		fmt.Fprintf(sio.Err, "%s: read: %v\n", s.arg0, r.err)
		return 1
	}
	line := strings.TrimSuffix(r.line, "\n")
	if !raw {
		line = strings.ReplaceAll(line, "\\", "")
	}
	fields := strings.Fields(line)
	for i, n := range names {
		switch {
		case i == len(names)-1 && i < len(fields):
			s.setVar(n, strings.Join(fields[i:], " "))
		case i < len(fields):
			s.setVar(n, strings.Clone(fields[i])) // not a part keeping the whole line alive
		default:
			s.setVar(n, "")
		}
	}
	if r.err != nil && r.line == "" {
		return 1
	}
	return 0
}

func builtinWait(s *shell, args []string, sio kernel.Stdio) int {
	s.jobsMu.Lock()
	var jobs []*job
	if len(args) > 1 {
		for _, a := range args[1:] {
			pid, _ := strconv.Atoi(a)
			if j, ok := s.jobs[pid]; ok {
				jobs = append(jobs, j)
			} else {
				s.jobsMu.Unlock()
				fmt.Fprintf(sio.Err, "%s: wait: pid %s is not a child of this shell\n", s.arg0, a)
				return 127
			}
		}
	} else {
		for _, j := range s.jobs {
			jobs = append(jobs, j)
		}
	}
	s.jobsMu.Unlock()
	s.p.Idle()
	st := 0
	for _, j := range jobs {
		select {
		case <-j.done:
			st = j.code
			s.jobsMu.Lock()
			delete(s.jobs, j.pid)
			s.jobsMu.Unlock()
		case sig := <-s.sig.pending:
			// A trapped signal interrupts wait (POSIX): status 128+sig, then the trap runs.
			s.sig.pending <- sig
			return 128 + int(sig)
		case <-s.p.Ctx().Done():
			return 1
		}
	}
	return st
}

func builtinEval(s *shell, args []string, sio kernel.Stdio) int {
	if !s.enter(sio, "eval", "eval") {
		return 1
	}
	defer s.leave()
	mem := s.p.Held()
	defer mem.Release()
	src, err := joinHeld(mem, args[1:])
	if err != nil {
		return 1 // out of memory: the OOM killer is ending the container
	}
	return s.evalString(src, sio)
}

func builtinSource(s *shell, args []string, sio kernel.Stdio) int {
	if len(args) < 2 {
		return 0
	}
	mem := s.p.Held() // the file, while it runs
	defer mem.Release()
	data, err := mem.ReadFile(s.p.AbsIn(s.dir, args[1]))
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: .: can't open '%s': %s\n", s.arg0, args[1], kernel.LineError(err))
		return 2
	}
	if !s.enter(sio, args[1], "source") {
		return 1
	}
	defer s.leave()
	return s.evalString(string(data), sio)
}

// builtinExec replaces the shell with the command, as exec(2) does: the
// command runs in the shell's own process (same pid, its argv shown in the
// process table), and the shell ends with the command's status.
func builtinExec(s *shell, args []string, sio kernel.Stdio) int {
	if len(args) == 1 {
		// exec with only redirections: applied to the shell's own stdio.
		s.io = sio
		return 0
	}
	env := s.exportedEnv(nil)
	exe, err := s.p.LookPath(args[1], env, s.dir)
	if err != nil {
		st := s.execFailed(args[1], err, sio)
		s.exitReq, s.exitCode = true, st
		return st
	}
	if s.sub {
		// In a subshell (pipeline, $(...)) the shell shares its task with the
		// parent: run the command as a child instead.
		st, err := s.p.Spawn(exe, args[1:], env, s.dir, sio, true)
		if err != nil {
			return s.forkFailed(sio)
		}
		s.exitReq, s.exitCode = true, st
		return st
	}
	// The program replaces the shell: the shell unwinds (exitReq) and the program runs in
	// its place, from runExecutable's loop, with the files the shell redirected for it.
	next := s.p.Execve(exe, args[1:], env, s.dir, sio)
	s.p.SetSignalHandler(nil)
	s.p.Next = next
	s.exitReq, s.exitCode = true, 0
	// The shell is gone: no EXIT trap runs after a successful exec.
	s.sig.mu.Lock()
	s.setTrap("EXIT", "", true)
	s.sig.mu.Unlock()
	return 0
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}

func builtinType(s *shell, args []string, sio kernel.Stdio) int {
	rest := args[1:]
	verbose := args[0] == "type"
	if len(rest) > 0 && (rest[0] == "-v" || rest[0] == "-V") {
		verbose = rest[0] == "-V"
		rest = rest[1:]
	} else if args[0] == "command" && len(rest) > 0 {
		// command CMD ARGS runs CMD without function lookup.
		c := &simpleCmd{words: quoteAll(rest)}
		saved := s.funcs
		s.funcs = map[string]*funcDef{}
		st := s.runSimple(c, sio)
		s.funcs = saved
		return st
	}
	st := 0
	for _, name := range rest {
		_, isB := shellBuiltins[name]
		_, isI := s.p.InlineApplet(name)
		switch {
		case isB || isI:
			if verbose {
				fmt.Fprintf(sio.Out, "%s is a shell builtin\n", name)
			} else {
				fmt.Fprintln(sio.Out, name)
			}
		default:
			exe, err := s.p.LookPath(name, s.exportedEnv(nil), s.dir)
			if err != nil {
				if verbose {
					fmt.Fprintf(sio.Out, "%s: not found\n", name)
				}
				st = 1
				continue
			}
			if verbose {
				fmt.Fprintf(sio.Out, "%s is %s\n", name, exe.Path)
			} else {
				fmt.Fprintln(sio.Out, exe.Path)
			}
		}
	}
	return st
}

// Sh is sh: -c STRING [ARG0 ARGS], a script file, or commands read
// from stdin (with a "/ # " prompt on a TTY).
func Sh(p *kernel.Proc) int {
	s := newShell(p)
	defer s.releaseAll()
	args := p.Args[1:]
	cmdMode := false
	for len(args) > 0 && len(args[0]) > 1 && (args[0][0] == '-' || args[0][0] == '+') {
		a := args[0]
		args = args[1:]
		if a == "--" || a == "-" {
			break
		}
		on := a[0] == '-'
		for _, f := range a[1:] {
			switch f {
			case 'c':
				cmdMode = true
			case 'e':
				s.errexit = on
			case 'x':
				s.xtrace = on
			case 'u':
				s.nounset = on
			}
		}
	}
	var src string
	switch {
	case cmdMode:
		if len(args) == 0 {
			fmt.Fprintf(p.Stderr, "%s: -c requires an argument\n", s.arg0)
			return 2
		}
		src = args[0]
		if len(args) > 1 {
			s.arg0 = args[1]
			s.setParams(args[2:])
		}
	case len(args) > 0:
		script := p.Held() // the script, read whole, while it runs
		defer script.Release()
		data, err := script.ReadFile(p.Abs(args[0]))
		if err != nil {
			fmt.Fprintf(p.Stderr, "%s: can't open '%s': %s\n", s.arg0, args[0], kernel.LineError(err))
			return 2
		}
		src = string(data)
		s.arg0 = args[0]
		s.setParams(args[1:])
	default:
		return s.interactive()
	}
	ps := newParser(src, p.Held())
	defer ps.lx.mem.Release()
	l, err := ps.line()
	if l != nil && err == nil {
		if t, perr := ps.lx.peek(); perr == nil && t.kind == tEOF {
			if sc := singleExternal(s, l); sc != nil {
				// Like busybox ash, `sh -c "cmd args"` execs a lone external command
				// instead of forking it: the command takes the shell's pid.
				words, err := s.expandWords(sc.words)
				if err == nil && len(words) > 0 {
					return builtinExec(s, append([]string{"exec"}, words...), s.io)
				}
			}
		}
	}
	if err == nil {
		err = s.runLines(ps, l, s.io)
	}
	if p.Next != nil {
		return 0 // exec'd: the program runs in the shell's place
	}
	if errors.Is(err, errIncomplete) {
		err = &syntaxError{"unexpected end of file"}
	}
	if err != nil {
		// A syntax error ends a script where it is found, after the lines before it ran
		// (ash parses and runs a line at a time), with status 2.
		fmt.Fprintf(p.Stderr, "%s: %v\n", s.arg0, err)
		s.exitReq, s.exitCode = true, 2
	}
	st := s.status
	s.runPendingTraps()
	if s.exitReq {
		st = s.exitCode
	}
	s.exitCode = st
	s.runExitTrap(s.io)
	return s.exitCode
}

// singleExternal returns the command when l is one plain simple command that
// is not a builtin or function (no assignments, redirections, pipes or &).
func singleExternal(s *shell, l *list) *simpleCmd {
	if len(l.items) != 1 || l.async[0] || len(l.items[0].rest) > 0 {
		return nil
	}
	pl := l.items[0].first
	if pl.bang || len(pl.cmds) != 1 {
		return nil
	}
	sc, ok := pl.cmds[0].(*simpleCmd)
	if !ok || len(sc.assigns) > 0 || len(sc.redirs) > 0 || len(sc.words) == 0 {
		return nil
	}
	name := sc.words[0]
	if !isName(strings.ReplaceAll(strings.ReplaceAll(name, "/", "_"), "-", "_")) && !strings.HasPrefix(name, "/") {
		return nil // quoted or expanded command names take the general path
	}
	if _, ok := shellBuiltins[name]; ok {
		return nil
	}
	if _, ok := s.p.InlineApplet(name); ok {
		return nil
	}
	return sc
}

func (s *shell) prompt() string {
	if v, ok := s.vars["PS1"]; ok {
		return v
	}
	if s.p.Identity().UID == 0 {
		return s.dir + " # "
	}
	return s.dir + " $ "
}

func (s *shell) interactive() int {
	s.ignoreInt.Store(s.p.TTY)
	var buf string
	bufMem := s.p.Held() // the command being typed, until it runs
	defer bufMem.Release()
	type res struct {
		line string
		err  error
	}
	for {
		if s.p.TTY {
			if buf == "" {
				fmt.Fprint(s.io.Out, s.prompt())
			} else {
				fmt.Fprint(s.io.Out, "> ")
			}
		}
		ch := make(chan res, 1)
		go func() {
			defer s.p.RecoverCrash()
			mem := s.p.Held() // the line while it is read (its goroutine's own: it may outlive the shell)
			defer mem.Release()
			l, err := lineReader{s.io.In, mem}.readLine()
			ch <- res{l, err}
		}()
		s.p.Idle()
		var r res
		select {
		case r = <-ch:
		case <-s.p.Ctx().Done():
			return s.status
		}
		if errors.Is(r.err, kernel.ErrTooBig) {
			fmt.Fprintf(s.io.Err, "%s: %v\n", s.arg0, r.err)
			s.status = 1
			break
		}
		if r.line == "" && r.err != nil {
			break
		}
		if len(buf)+len(r.line) > kernel.MaxHeldBytes {
			// A command never completed (an open quote) over a long input.
			fmt.Fprintf(s.io.Err, "%s: %v\n", s.arg0, kernel.ErrTooBig)
			s.status = 1
			break
		}
		if bufMem.Grow(int64(len(r.line))) != nil {
			break // out of memory: the OOM killer is ending the container
		}
		buf += r.line
		tree := s.p.Held()
		l, perr := parseHeld(buf, tree)
		if errors.Is(perr, errIncomplete) && r.err == nil {
			tree.Release()
			continue
		}
		buf = ""
		bufMem.Release()
		if perr != nil {
			tree.Release()
			fmt.Fprintf(s.io.Err, "%s: %v\n", s.arg0, perr)
			s.status = 2
			continue
		}
		s.runList(l, s.io)
		tree.Release()
		s.runPendingTraps()
		if s.aborted {
			// A shell error ends the command line, not an interactive shell.
			s.exitReq, s.aborted = false, false
		}
		if s.exitReq || s.p.Ctx().Err() != nil || r.err != nil {
			break
		}
	}
	st := s.status
	if s.exitReq {
		st = s.exitCode
	}
	s.exitCode = st
	s.runExitTrap(s.io)
	return s.exitCode
}

// loopEnds applies what the loop body just asked for, after one pass of a while, until or for
// loop: break (one level used up here), continue N (N > 1 ends this loop too), and exit, return or
// the end of the process, which end every loop.
func (s *shell) loopEnds() bool {
	if s.brk > 0 {
		s.brk--
		return true
	}
	if s.cont > 0 {
		s.cont--
		if s.cont > 0 {
			return true
		}
	}
	return s.exitReq || s.retReq || s.p.Ctx().Err() != nil
}

// Builtin reports whether name is one of the shell's own builtins (cd,
// export, trap, ...), which `type` calls a shell builtin besides the inline
// applets.
func Builtin(name string) bool {
	_, ok := shellBuiltins[name]
	return ok
}
