package process

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not in PATH", []string{"no-such-binary"}, `exec: "no-such-binary": executable file not found in $PATH`},
		{"missing path", []string{"/usr/bin/missing"}, `exec: "/usr/bin/missing": stat /usr/bin/missing: no such file or directory`},
		{"directory", []string{"/etc"}, `exec: "/etc": permission denied`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(context.Background(), Spec{Args: tc.args})
			var ee *ExecError
			if !errors.As(err, &ee) || err.Error() != tc.want {
				t.Fatalf("Start(%q) = %v, want ExecError %q", tc.args, err, tc.want)
			}
		})
	}
	if _, err := Start(context.Background(), Spec{}); err == nil {
		t.Error("Start with no command succeeded")
	}
}

// TestSignals covers what StopContainer relies on: TERM ends a process with
// 143 unless it handles TERM, a trap runs its action after interrupting the
// foreground sleep, servers exit 0, KILL is always 137.
func TestSignals(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		sig    syscall.Signal
		code   int
		stdout string
	}{
		{"sleep TERM", []string{"sleep", "1000"}, syscall.SIGTERM, 143, ""},
		{"sleep KILL", []string{"sleep", "1000"}, syscall.SIGKILL, 137, ""},
		{"sh loop TERM", []string{"sh", "-c", "while true; do sleep 1; done"}, syscall.SIGTERM, 143, ""},
		{"trap TERM exits cleanly", []string{"sh", "-c", "trap 'echo caught; exit 0' TERM; while true; do sleep 1; done"}, syscall.SIGTERM, 0, "caught\n"},
		{"trap ignores TERM, KILL still works", []string{"sh", "-c", "trap '' TERM; sleep 1000"}, syscall.SIGKILL, 137, ""},
		{"top TERM", []string{"sh", "-c", "top"}, syscall.SIGTERM, 143, "*"},
		{"pause TERM", []string{"/pause"}, syscall.SIGTERM, 0, ""},
		{"INT", []string{"sleep", "1000"}, syscall.SIGINT, 130, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var so syncBuffer
			spec := Spec{Args: tc.args, Stdout: &so}
			if tc.args[0] == "/pause" {
				spec.FS = newFS(t, FSConfig{Image: BaseLayer("pause")})
			}
			p := startProc(t, spec)
			// Wait until the command is running its blocking part.
			waitFor(t, "the process tree", func() bool {
				for _, pi := range p.Processes() {
					if pi.Name == "sleep" || pi.Name == "top" || pi.Name == "pause" {
						return true
					}
				}
				return false
			})
			// A trap is set before the loop's sleep starts; pause, pid 1 itself, sets its
			// handler once running: wait for that, not for a guess at how long it takes.
			if tc.args[0] == "/pause" {
				waitFor(t, "pause's signal handler", p.HasSignalHandler)
			}
			if err := p.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(hangBound):
				t.Fatal("process did not end after the signal")
			}
			code, exited := p.ExitCode()
			if !exited || code != tc.code || (tc.stdout != "*" && so.String() != tc.stdout) {
				t.Errorf("after %v: code %d (exited %v) stdout %q, want %d %q", tc.sig, code, exited, so.String(), tc.code, tc.stdout)
			}
			if p.FinishedAt().IsZero() {
				t.Error("FinishedAt is zero after exit")
			}
			if err := p.Signal(syscall.SIGTERM); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("signalling an ended process = %v, want ESRCH", err)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"true"}, 0},
		{[]string{"false"}, 1},
		{[]string{"sh", "-c", "exit 1"}, 1},
		{[]string{"sh", "-c", "exit 42"}, 42},
		{[]string{"sh", "-c", "nosuch"}, 127},
		{[]string{"echo", "done"}, 0},
	}
	for _, tc := range tests {
		_, _, code := runCmd(t, Spec{Args: tc.args})
		if code != tc.code {
			t.Errorf("%q exit code %d, want %d", tc.args, code, tc.code)
		}
	}
}

func TestExecSync(t *testing.T) {
	fsys := newFS(t, FSConfig{Hostname: "box"})
	p := startProc(t, Spec{Args: []string{"sh", "-c", "top"}, FS: fsys, Hostname: "box", Env: []string{"FROM_SPEC=1"}})
	ctx := context.Background()

	out, errOut, code, err := p.ExecSync(ctx, []string{"echo", "-n", "hello"}, 0)
	if err != nil || string(out) != "hello" || len(errOut) != 0 || code != 0 {
		t.Fatalf("echo -n hello: %q %q %d %v", out, errOut, code, err)
	}
	out, _, _, _ = p.ExecSync(ctx, []string{"sh", "-c", "echo $FROM_SPEC; hostname"}, 0)
	if string(out) != "1\nbox\n" {
		t.Errorf("exec does not share env and hostname: %q", out)
	}
	// Files written by one exec are visible to the next: same file system.
	p.ExecSync(ctx, []string{"touch", "/tmp/healthy"}, 0)
	if _, _, code, _ := p.ExecSync(ctx, []string{"cat", "/tmp/healthy"}, 0); code != 0 {
		t.Errorf("exec probe with the file present: code %d", code)
	}
	p.ExecSync(ctx, []string{"rm", "/tmp/healthy"}, 0)
	if _, _, code, _ := p.ExecSync(ctx, []string{"cat", "/tmp/healthy"}, 0); code != 1 {
		t.Errorf("exec probe with the file absent: code %d, want 1", code)
	}

	// critest "execSync with timeout": the command errors and is gone from pgrep.
	start := time.Now()
	_, _, _, err = p.ExecSync(ctx, []string{"sleep", "4321"}, 200*time.Millisecond)
	if !errors.Is(err, ErrExecTimeout) {
		t.Fatalf("sleep 4321 with a timeout: %v, want ErrExecTimeout", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}
	out, _, code, err = p.ExecSync(ctx, []string{"sh", "-c", "pgrep sleep || true"}, 0)
	if err != nil || string(out) != "" || code != 0 {
		t.Errorf("pgrep after timeout: %q code %d err %v", out, code, err)
	}

	if _, _, _, err := p.ExecSync(ctx, []string{"nosuch"}, 0); err == nil || !strings.Contains(err.Error(), "executable file not found in $PATH") {
		t.Errorf("exec of a missing binary: %v", err)
	}

	// pgrep sees a running exec and kill ends it.
	bg, err := p.Exec(ctx, ExecSpec{Args: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _, _ = p.ExecSync(ctx, []string{"pgrep", "sleep"}, 0)
	pid := strings.TrimSpace(string(out))
	if pid == "" {
		t.Fatal("pgrep did not find the running sleep")
	}
	if _, _, code, _ := p.ExecSync(ctx, []string{"kill", pid}, 0); code != 0 {
		t.Fatalf("kill %s: code %d", pid, code)
	}
	if code := bg.Wait(); code != 143 {
		t.Errorf("killed exec exit code %d, want 143", code)
	}

	// When the main process ends, execs end too and new execs are refused.
	long, _ := p.Exec(ctx, ExecSpec{Args: []string{"sleep", "1000"}})
	p.Signal(syscall.SIGKILL)
	p.Wait()
	select {
	case <-long.Done():
	case <-time.After(hangBound):
		t.Fatal("exec survived its container")
	}
	if _, err := p.Exec(ctx, ExecSpec{Args: []string{"true"}}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("exec after exit: %v, want ErrNotRunning", err)
	}
}

// TestAttachShell drives an interactive sh through its stdin, as critest's
// attach spec does (write `echo -n hello`, read "hello").
func TestAttachShell(t *testing.T) {
	inR, inW := io.Pipe()
	var out syncBuffer
	p := startProc(t, Spec{Args: []string{"/bin/sh"}, Stdin: inR, Stdout: &out, Stderr: &out})
	if _, err := io.WriteString(inW, "echo -n hello\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "hello", func() bool { return out.String() == "hello" })
	io.WriteString(inW, "if true; then\necho multi\nfi\n")
	waitFor(t, "multi-line command", func() bool { return out.String() == "hellomulti\n" })
	io.WriteString(inW, "exit 4\n")
	if code := p.Wait(); code != 4 {
		t.Errorf("exit code %d, want 4", code)
	}
	inW.Close()
}

func TestTTY(t *testing.T) {
	inR, inW := io.Pipe()
	var out syncBuffer
	p := startProc(t, Spec{Args: []string{"sh"}, Stdin: inR, Stdout: &out, TTY: true})
	waitFor(t, "prompt", func() bool { return out.String() == "/ # " })
	io.WriteString(inW, "echo hi\r")
	waitFor(t, "echo and output", func() bool { return strings.HasSuffix(out.String(), "echo hi\r\nhi\r\n/ # ") })
	io.WriteString(inW, "sleep 100\r")
	waitFor(t, "sleep", func() bool {
		for _, pi := range p.Processes() {
			if pi.Name == "sleep" {
				return true
			}
		}
		return false
	})
	io.WriteString(inW, "\x03") // ^C interrupts the foreground sleep, the shell stays
	io.WriteString(inW, "exit\r")
	p.Wait()
	if !strings.Contains(out.String(), "^C") {
		t.Errorf("no ^C echo in %q", out.String())
	}
}

func TestBehaviour(t *testing.T) {
	t.Run("exit after delay", func(t *testing.T) {
		_, _, code := runCmd(t, Spec{Args: []string{"sleep", "1000"}, Behaviour: Behaviour{Exit: &ExitBehaviour{Code: 3, After: 50 * time.Millisecond}}})
		if code != 3 {
			t.Errorf("code %d, want 3", code)
		}
	})
	t.Run("crash on start", func(t *testing.T) {
		out, errOut, code := runCmd(t, Spec{Args: []string{"echo", "never"}, Behaviour: Behaviour{CrashOnStart: true}})
		if code != 1 || !strings.Contains(errOut, "simulated crash") || strings.Contains(out, "never") {
			t.Errorf("code %d stdout %q stderr %q", code, out, errOut)
		}
	})
	t.Run("lines per second", func(t *testing.T) {
		var out syncBuffer
		p := startProc(t, Spec{Args: []string{"sleep", "1000"}, Stdout: &out, Behaviour: Behaviour{LinesPerSecond: 100}})
		waitFor(t, "3 lines", func() bool { return strings.Count(out.String(), "\n") >= 3 })
		p.Signal(syscall.SIGKILL)
	})
	t.Run("memory", func(t *testing.T) {
		p := startProc(t, Spec{Args: []string{"sleep", "1000"}, Behaviour: Behaviour{MemoryBytes: 64 << 20}})
		st := p.Stats()
		if st.MemoryBytes < 64<<20 || st.Processes != 1 {
			t.Errorf("stats %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
		if p.Stats().CPUNanos <= st.CPUNanos {
			t.Error("CPU time does not grow")
		}
	})
}

func TestScriptWithShebang(t *testing.T) {
	fsys := newFS(t, FSConfig{})
	if err := fsys.WriteFile("/run.sh", []byte("#!/bin/sh\necho script $1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _, code := runCmd(t, Spec{Args: []string{"/run.sh", "arg"}, FS: fsys})
	if out != "script arg\n" || code != 0 {
		t.Errorf("stdout %q code %d", out, code)
	}
}

// TestSharedPIDNamespace: containers sharing a pod (or node) PID namespace
// see each other's processes; the pause process is pid 1 and its end ends all.
func TestSharedPIDNamespace(t *testing.T) {
	podNS := NewPIDNamespace()
	pause := startProc(t, Spec{Args: []string{"/pause"}, FS: newFS(t, FSConfig{Image: BaseLayer("pause")}), PIDNamespace: podNS})
	ll := &loopbackListen{}
	web := startProc(t, Spec{Args: []string{"nginx", "-g", "daemon off;"}, FS: newFS(t, FSConfig{Image: BaseLayer("nginx")}), PIDNamespace: podNS, Listen: ll.listen})
	box := startProc(t, Spec{Args: []string{"sleep", "1000"}, PIDNamespace: podNS})
	waitFor(t, "nginx pid file", func() bool {
		_, _, code, _ := web.ExecSync(t.Context(), []string{"test", "-f", "/var/run/nginx.pid"}, 0)
		return code == 0
	})
	out, _, _, _ := web.ExecSync(t.Context(), []string{"cat", "/proc/1/cmdline"}, 0)
	if string(out) != "/pause\x00" {
		t.Errorf("/proc/1/cmdline in a shared namespace = %q, want the pause process", out)
	}
	nginxPid, _, _, _ := web.ExecSync(t.Context(), []string{"cat", "/var/run/nginx.pid"}, 0)
	pids, _, _, _ := box.ExecSync(t.Context(), []string{"pidof", "nginx"}, 0)
	if !strings.Contains(string(pids), strings.TrimSpace(string(nginxPid))) {
		t.Errorf("pidof nginx from a sibling container = %q, nginx pid %q", pids, nginxPid)
	}
	if got := len(box.Processes()); got != 1 {
		t.Errorf("Processes() of one container lists %d processes, want only its own", got)
	}
	pause.Signal(syscall.SIGKILL)
	for _, p := range []*Process{web, box} {
		select {
		case <-p.Done():
		case <-time.After(hangBound):
			t.Fatal("a container survived the end of its PID namespace's pid 1")
		}
	}
}

// TestExecReplacesShell: `sh -c "cmd"` and `exec cmd` keep the pid, as
// busybox ash does, so pid 1 is the real workload (nginx behind its
// docker-entrypoint.sh, sleep behind sh -c).
func TestExecReplacesShell(t *testing.T) {
	tests := []struct {
		name  string
		image string
		args  []string
		want  string // name of pid 1
	}{
		{"sh -c single command", "busybox", []string{"sh", "-c", "sleep 1000"}, "sleep"},
		{"entrypoint script exec", "nginx", []string{"/docker-entrypoint.sh", "nginx", "-g", "daemon off;"}, "nginx"},
		{"sh -c list keeps the shell", "busybox", []string{"sh", "-c", "sleep 1000; true"}, "sh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, Spec{Args: tc.args, FS: newFS(t, FSConfig{Image: BaseLayer(tc.image)}), Listen: (&loopbackListen{}).listen})
			waitFor(t, "pid 1 to be "+tc.want, func() bool {
				ps := p.Processes()
				return len(ps) > 0 && ps[0].PID == 1 && ps[0].Name == tc.want
			})
		})
	}
}

func TestExecStream(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sleep", "1000"}})
	var out syncBuffer
	code, err := p.ExecStream(t.Context(), []string{"sh", "-c", "read x; echo got $x; exit 3"}, strings.NewReader("line\n"), &out, &out, false)
	if err != nil || code != 3 || out.String() != "got line\n" {
		t.Errorf("code %d err %v out %q", code, err, out.String())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	code, err = p.ExecStream(ctx, []string{"sleep", "1000"}, nil, &out, &out, false)
	if !errors.Is(err, context.DeadlineExceeded) || code != 137 {
		t.Errorf("cancelled exec: code %d err %v", code, err)
	}
}

// TestInitSignalRule: with the kernel's init rule, pid 1 ignores TERM it has
// no handler for, and a trap waits for the foreground command.
func TestInitSignalRule(t *testing.T) {
	// In a synctest bubble, synctest.Wait returns once the simulation has done all
	// it will do about the TERM (every goroutine durably blocked): had TERM ended
	// pid 1, it would have by then.
	synctest.Test(t, func(t *testing.T) {
		p := startProc(t, Spec{Args: []string{"sh", "-c", "while true; do sleep 1000; done"}, InitSignalRule: true})
		synctest.Wait()
		if n := len(p.Processes()); n != 2 {
			t.Fatalf("%d processes, want sh and its sleep", n)
		}
		p.Signal(syscall.SIGTERM)
		synctest.Wait()
		if _, exited := p.ExitCode(); exited {
			t.Fatal("pid 1 without a handler ended on TERM")
		}
		p.Signal(syscall.SIGKILL)
		if code := p.Wait(); code != 137 {
			t.Errorf("KILL: %d (143: TERM ended it)", code)
		}
	})

	var out syncBuffer
	q := startProc(t, Spec{Args: []string{"sh", "-c", "trap 'echo trapped; exit 0' TERM; while true; do sleep 0.2; done"}, Stdout: &out, InitSignalRule: true})
	waitFor(t, "sleep", func() bool { return len(q.Processes()) == 2 })
	q.Signal(syscall.SIGTERM)
	if code := q.Wait(); code != 0 || out.String() != "trapped\n" {
		t.Errorf("trap under the init rule: code %d out %q", code, out.String())
	}
}

// TestTTYWithoutStdin: a TTY container without stdin keeps its interactive
// shell (nobody types, nothing ends it) until it is stopped. The process runs in
// a synctest bubble, so synctest.Wait returns once every goroutine of the
// simulation is durably blocked: a shell that read EOF would have ended by then.
func TestTTYWithoutStdin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		p := startProc(t, Spec{Args: []string{"sh"}, TTY: true, Stdout: &out})
		synctest.Wait()
		if out.String() != "/ # " {
			t.Fatalf("output %q, want the prompt", out.String())
		}
		if _, exited := p.ExitCode(); exited {
			t.Fatal("the shell of a TTY container without stdin ended")
		}
		p.Signal(syscall.SIGKILL)
		if code := p.Wait(); code != 137 {
			t.Errorf("code %d", code)
		}
	})
}

// A sleeping process holds one goroutine, its program's: its end is watched with
// context.AfterFunc and reported through AfterExit, so a node of 30,000 sleeping containers held
// 30,000 goroutines rather than 90,000 (cri-fake/server's BenchmarkLargeNode). Killed, each still
// reports its end, once, through Done and every AfterExit callback. (A runtime now keeps such a
// process dormant, with no goroutine, until something looks at it: Dormant, Spec.StartedAt, and
// cri-fake/runtime's TestDormantContainerHoldsNoProcess.)
func TestSleepingProcessHoldsOneGoroutine(t *testing.T) {
	const n = 50
	// Counted from every goroutine's stack: those running sleep, and those the simulation
	// started for a process (created by kernel.(*container).run). The processes of the tests
	// before may still be ending (or, left running, be counted before as after), so what is
	// counted is the growth, waited for.
	count := func() (sleeping, perProcess int) {
		buf := make([]byte, 64<<20)
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "applets.appletSleep(") {
				sleeping++
			}
			if strings.Contains(g, "created by github.com/plugsim/plugsim/cri-fake/process/kernel.(*container).run") {
				perProcess++
			}
		}
		return sleeping, perProcess
	}
	sleepBase, base := count()
	fsys := newFS(t, FSConfig{})
	procs := make([]*Process, n)
	for i := range procs {
		procs[i] = startProc(t, Spec{Args: []string{"sleep", "3600"}, FS: fsys})
	}
	deadline := time.Now().Add(hangBound)
	sleeping, perProcess := count()
	for (sleeping-sleepBase < n || perProcess-base > n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		sleeping, perProcess = count()
	}
	if sleeping-sleepBase < n || perProcess-base > n {
		t.Fatalf("%d processes sleeping: %d more goroutines in sleep, %d more started for processes, want %d each", n, sleeping-sleepBase, perProcess-base, n)
	}
	var ended atomic.Int32
	for _, p := range procs {
		p.AfterExit(func() { ended.Add(1) })
		p.AfterExit(func() { ended.Add(1) })
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(hangBound):
			t.Fatal("a killed sleep did not end")
		}
		if code, _ := p.ExitCode(); code != 137 {
			t.Fatalf("killed sleep: exit %d, want 137", code)
		}
	}
	deadline = time.Now().Add(hangBound)
	for ended.Load() != 2*n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ended.Load(); got != 2*n {
		t.Fatalf("%d AfterExit callbacks ran, want %d", got, 2*n)
	}
	// One registered after the end runs too.
	done := make(chan struct{})
	procs[0].AfterExit(func() { close(done) })
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Fatal("AfterExit on an ended process never ran")
	}
}

// A dormant process woken up (Spec.StartedAt in the past) is the process it would have been:
// its start time is then, and sleep waits only for the rest; Dormant says which programs may be
// kept so and what a signal does to them.
func TestWokenDormantProcess(t *testing.T) {
	since := time.Now().Add(-time.Hour).Truncate(time.Second)
	p := startProc(t, Spec{Args: []string{"sleep", "1800"}, StartedAt: since})
	select {
	case <-p.Done():
	case <-time.After(hangBound):
		t.Fatal("sleep 1800 started an hour ago did not end at once")
	}
	if code, _ := p.ExitCode(); code != 0 || !p.StartedAt().Equal(since) {
		t.Fatalf("woken sleep 1800: exit %d, started %v, want 0 and %v", code, p.StartedAt(), since)
	}
	q := startProc(t, Spec{Args: []string{"sleep", "7200"}, StartedAt: since})
	if ps := q.Processes(); len(ps) != 1 || !ps[0].Started.Equal(since) {
		t.Fatalf("woken sleep 7200: process table %+v, want one started at %v", ps, since)
	}
	// An exec in it is a new program: its sleep waits for all of its own time (at least: a
	// lower bound, which a slow machine cannot break).
	start := time.Now()
	out, _, code, err := q.ExecSync(context.Background(), []string{"sh", "-c", "sleep 1; echo slept"}, 0)
	if err != nil || code != 0 || string(out) != "slept\n" || time.Since(start) < time.Second {
		t.Fatalf("exec in a woken process: %q %d %v after %v, want its sleep 1 to take a second", out, code, err, time.Since(start))
	}
	q.Signal(syscall.SIGKILL)
	q.Wait()

	fsys := newFS(t, FSConfig{})
	look := func(args ...string) (Dormancy, bool) {
		exe, err := LookupExecutable(fsys, args, nil, "/")
		if err != nil {
			t.Fatal(err)
		}
		return Dormant(exe, args, nil, 0)
	}
	for _, tc := range []struct {
		args []string
		ok   bool
		d    time.Duration
	}{
		{[]string{"sleep", "3600"}, true, time.Hour},
		{[]string{"sleep", "infinity"}, true, Forever},
		{[]string{"/bin/sleep", "1", "2m"}, true, 121 * time.Second},
		{[]string{"sleep"}, false, 0},        // its usage error
		{[]string{"sleep", "nan"}, false, 0}, // invalid number
		{[]string{"sh", "-c", "sleep 1"}, false, 0},
		{[]string{"cat"}, false, 0},
	} {
		d, ok := look(tc.args...)
		if ok != tc.ok || d.For != tc.d {
			t.Errorf("Dormant(%q) = %v %v, want %v %v", tc.args, d.For, ok, tc.ok, tc.d)
		}
	}
	d, _ := look("sleep", "3600")
	if code, _, ends := d.Signalled(syscall.SIGTERM); !ends || code != 143 {
		t.Errorf("TERM to a dormant sleep: %d %v, want 143", code, ends)
	}
	if _, _, ends := d.Signalled(syscall.SIGUSR1); ends {
		t.Error("USR1 to a dormant sleep ends it without starting it")
	}
	if _, ok := Dormant(vfs.Executable{Applet: "sleep"}, []string{"sleep", "1"}, nil, 1<<20); ok {
		t.Error("a sleep under a 1 MiB memory limit is dormant: its OOM kill at start would be lost")
	}
}
