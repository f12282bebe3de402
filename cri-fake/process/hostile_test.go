package process

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/internal/crashtest"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostileSeeds are command lines a user may send on purpose (testdata/hostile-commands.txt):
// numbers out of range, empty and negative lists, unbalanced quotes and expansions, deep nesting,
// huge counts. None may panic.
func hostileSeeds(tb testing.TB) []string {
	return crashtest.Seeds(tb, filepath.Join("testdata", "hostile-commands.txt"))
}

// runHostile runs script as `sh -c` in a fresh busybox view with a deadline, and fails the test
// when the simulation reported a crash.
func runHostile(tb testing.TB, script string) (stdout, stderr string, code int) {
	tb.Helper()
	var log crashtest.Log
	var so, se syncBuffer
	p, err := Start(context.Background(), Spec{Args: []string{"sh", "-c", script}, FS: newFS(tb, FSConfig{Hostname: "h"}),
		Hostname: "h", Stdout: &so, Stderr: &se, Logf: log.Logf,
		// No kernel network: a hostile ping or wget must not send packets from the node's
		// namespace (servers listen on loopback ports of the test's choosing).
		Listen: (&loopbackListen{}).listen})
	if err != nil {
		tb.Fatalf("start %q: %v", script, err)
	}
	deadline := 60 * time.Second // generous: only a panic fails here, and a busy -race run is slow
	if fuzzing() {
		deadline = time.Second // the fuzzer takes a slow input for a hang
	}
	select {
	case <-p.Done():
	case <-time.After(deadline):
		// Long or endless loops (seq 1 0 5 is busybox's endless 1s) may run: only panics count.
		p.Signal(9)
		<-p.Done()
	}
	if s := log.String(); s != "" {
		tb.Fatalf("sh -c %q crashed the simulation:\n%s", script, s)
	}
	code, _ = p.ExitCode()
	return so.String(), se.String(), code
}

// fuzzing tells whether the test binary was asked to fuzz (-test.fuzz).
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// TestHostileCommandLinesNeverCrash runs the seed corpus of FuzzShell: none of these may reach a
// recover (every one must be handled as busybox handles it, with a message and a status).
func TestHostileCommandLinesNeverCrash(t *testing.T) {
	for _, s := range hostileSeeds(t) {
		t.Run(s, func(t *testing.T) {
			t.Parallel()
			runHostile(t, s)
		})
	}
}

// FuzzShell feeds command lines to sh -c. `go test` runs its few seeds only (the whole corpus
// runs, in parallel, in TestHostileCommandLinesNeverCrash); `go test -run '^$' -fuzz FuzzShell
// ./cri-fake/process/` searches for more, starting from the corpus, and keeps what crashes in
// testdata/fuzz.
func FuzzShell(f *testing.F) {
	if testing.Short() || !fuzzing() {
		for _, s := range hostileSeeds(f)[:8] {
			f.Add(s)
		}
	} else {
		for _, s := range hostileSeeds(f) {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, script string) {
		if len(script) > 4096 {
			return
		}
		runHostile(t, script)
	})
}

// deepInputs are command lines nested far past maxNest: each must be refused with an error, not
// overflow the goroutine's stack (fatal to the whole runtime, unlike a panic).
func deepInputs() map[string]string {
	const n = 200000
	return map[string]string{
		"subshells":              strings.Repeat("(", n) + "true" + strings.Repeat(")", n),
		"groups":                 strings.Repeat("{ ", n) + "true" + strings.Repeat("; }", n),
		"ifs":                    strings.Repeat("if true; then ", n) + "true" + strings.Repeat("; fi", n),
		"command substitutions":  "echo " + strings.Repeat("$(echo ", n) + "x" + strings.Repeat(")", n),
		"quoted substitutions":   "echo " + strings.Repeat(`"$(echo `, 2000) + "x" + strings.Repeat(`)"`, 2000),
		"parameter defaults":     "echo " + strings.Repeat("${a:-", n) + "x" + strings.Repeat("}", n),
		"arithmetic parentheses": "echo $((" + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + "))",
		"arithmetic unary":       "echo $((" + strings.Repeat("-", n) + "1))",
		"test negations":         "test " + strings.Repeat("! ", n) + "x",
		"test parentheses":       "test " + strings.Repeat("'(' ", n) + "x" + strings.Repeat(" ')'", n),
	}
}

func TestDeepNestingIsRefused(t *testing.T) {
	for name, script := range deepInputs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, stderr, _ := runHostile(t, script)
			if !strings.Contains(stderr, "nest") && !strings.Contains(stderr, "recursion") && !strings.Contains(stderr, "complex") {
				t.Fatalf("stderr %q: want a nesting error", stderr)
			}
		})
	}
}

// TestNestingLimits: what happens at maxNest, as bash words it with FUNCNEST=1000 (busybox ash
// overflows its stack and dies of SIGSEGV).
func TestNestingLimits(t *testing.T) {
	tests := []struct {
		name, script, stdout, stderr string
		code                         int
	}{
		{"function recursion aborts the shell", "f() { f; }; f; echo not reached",
			"", "sh: f: maximum function nesting level exceeded (1000)\n", 1},
		{"just under the limit works", "f() { [ $1 -lt 999 ] && f $(($1+1)) || echo depth $1; }; f 0", "depth 999\n", "", 0},
		{"eval recursion", "f() { eval f; }; f",
			"", "sh: f: maximum function nesting level exceeded (1000)\n", 1},
		{"source recursion", "echo '. /tmp/r' > /tmp/r; . /tmp/r; echo not reached",
			"", "sh: /tmp/r: maximum source nesting level exceeded (1000)\n", 1},
		{"in a command substitution only the subshell aborts", `x=$(f() { f; }; f); echo "st=$?"`,
			"st=1\n", "sh: f: maximum function nesting level exceeded (1000)\n", 0},
		{"in a pipeline only the element aborts", "f() { f; }; f | cat; echo after",
			"after\n", "sh: f: maximum function nesting level exceeded (1000)\n", 0},
		{"a trap that raises its own signal does not nest", "n=0; trap 'n=$((n+1)); [ $n -lt 3000 ] && kill -USR1 $$' USR1; kill -USR1 $$; echo $n",
			"3000\n", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runHostile(t, tc.script)
			if stdout != tc.stdout || stderr != tc.stderr || code != tc.code {
				t.Fatalf("got %q %q %d, want %q %q %d", stdout, stderr, code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

// TestInteractiveShellSurvivesAbort: a shell error ends the command line, not an interactive shell.
func TestInteractiveShellSurvivesAbort(t *testing.T) {
	var log crashtest.Log
	var so, se syncBuffer
	p := startProc(t, Spec{Args: []string{"sh"}, Stdin: strings.NewReader("f() { f; }; f\nshift -1\necho alive $?\n"),
		Stdout: &so, Stderr: &se, Logf: log.Logf})
	if code := p.Wait(); code != 0 || so.String() != "alive 2\n" {
		t.Fatalf("code %d stdout %q stderr %q", code, so.String(), se.String())
	}
}

// TestExecLoopsInBoundedStack: exec replaces the program, so a script that execs itself over and
// over must not grow the goroutine's stack (a recursion would reach Go's fatal stack limit).
func TestExecLoopsInBoundedStack(t *testing.T) {
	if !measuredAlone(t) {
		return
	}
	fsys := newFS(t, FSConfig{})
	script := "n=$((${n:-0}+1)); export n; [ $n -lt 20000 ] && exec sh /tmp/again; echo $n"
	if err := fsys.WriteFile("/tmp/again", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	peak := watchStack(t)
	stdout, stderr, code := runCmd(t, Spec{Args: []string{"sh", "/tmp/again"}, FS: fsys})
	if stdout != "20000\n" || code != 0 {
		t.Fatalf("got %q %q %d", stdout, stderr, code)
	}
	t.Logf("peak stack in use: %d KiB", peak()>>10)
	if got := peak(); got > 16<<20 {
		t.Fatalf("stack in use reached %d MiB over 20000 execs", got>>20)
	}
}

func TestShebangLoopIsELOOP(t *testing.T) {
	fsys := newFS(t, FSConfig{})
	if err := fsys.WriteFile("/tmp/loop", []byte("#!/tmp/loop\necho never\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCmd(t, Spec{Args: []string{"sh", "-c", "/tmp/loop; echo st=$?"}, FS: fsys})
	if stdout != "st=127\n" || stderr != "sh: /tmp/loop: Too many levels of symbolic links\n" || code != 0 {
		t.Fatalf("got %q %q %d", stdout, stderr, code)
	}
}

// watchStack samples the stack memory in use until the test ends and returns a function giving
// the highest sample so far.
func watchStack(tb testing.TB) func() uint64 {
	var mu sync.Mutex
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.StackInuse)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	tb.Cleanup(func() { close(stop); <-done })
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// TestDefectEndsOnlyItsProcess: a panic in a process's code ends that process with 139 and is
// reported with its stack; the shell that ran it, its siblings and the test binary go on.
func TestDefectEndsOnlyItsProcess(t *testing.T) {
	tests := []struct {
		name, script string
		stdout       string
		code         int
	}{
		{"main process", "echo boom >&2; echo not reached", "", 139},
		{"spawned child", "sh -c 'echo boom >&2'; echo st=$?", "st=139\n", 0},
		{"background job", "echo boom >&2 & wait $!; echo st=$?", "st=139\n", 0},
		{"pipeline element", "true | echo boom >&2; echo st=$?", "st=139\n", 0},
		{"command substitution", "x=$(echo boom >&2); echo not reached", "", 139},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log crashtest.Log
			var so syncBuffer
			p := startProc(t, Spec{Args: []string{"sh", "-c", tc.script}, Stdout: &so, Stderr: crashtest.PanicWriter{}, Logf: log.Logf})
			if code := p.Wait(); code != tc.code || so.String() != tc.stdout {
				t.Fatalf("code %d stdout %q, want %d %q", code, so.String(), tc.code, tc.stdout)
			}
			if l := log.String(); !strings.Contains(l, "injected defect") || !strings.Contains(l, "exit code 139") || !strings.Contains(l, "goroutine ") {
				t.Fatalf("crash report without the panic and its stack:\n%s", l)
			}
		})
	}
}

// TestExecDefectAnswers139: an exec whose command crashes answers 139 and the container keeps
// running and executing.
func TestExecDefectAnswers139(t *testing.T) {
	var log crashtest.Log
	p := startProc(t, Spec{Args: []string{"sleep", "1000"}, Logf: log.Logf})
	var so syncBuffer
	e, err := p.Exec(context.Background(), ExecSpec{Args: []string{"echo", "hi"}, Stdout: crashtest.PanicWriter{}, Stderr: &so})
	if err != nil {
		t.Fatal(err)
	}
	if code := e.Wait(); code != 139 {
		t.Fatalf("exec code %d, want 139", code)
	}
	out, _, code, err := p.ExecSync(context.Background(), []string{"echo", "still here"}, 0)
	if err != nil || code != 0 || string(out) != "still here\n" {
		t.Fatalf("next exec: %q %d %v", out, code, err)
	}
	if _, done := p.ExitCode(); done {
		t.Fatal("the container ended with its exec")
	}
}

// TestBusyboxAnswersHostileNumbers: the neighbours of each input that used to panic or never end,
// with what busybox 1.36 prints for them (checked against busybox's own binary).
func TestBusyboxAnswersHostileNumbers(t *testing.T) {
	const input = `printf 'a:b:c:d\nxyz\n:\n\nab\tcd\n' > /tmp/g; `
	tests := []struct {
		name, script, stdout, stderr string
		code                         int
	}{
		{"cut -c 0 is position 1", input + "cut -c 0 /tmp/g", "a\nx\n:\n\na\n", "", 0},
		{"cut -c 0- is the whole line", input + "cut -c 0- /tmp/g", "a:b:c:d\nxyz\n:\n\nab\tcd\n", "", 0},
		{"cut -c -0 prints the first byte", input + "cut -c -0 /tmp/g", "a\nx\n:\n\na\n", "", 0},
		{"cut -c , has no positions", input + "cut -c , /tmp/g", "", "cut: missing list of positions\n", 1},
		{"cut -f 0 is field 1", input + "cut -d: -f 0 /tmp/g", "a\nxyz\n\n\nab\tcd\n", "", 0},
		{"cut -f 1,,2 skips the empty item", input + "cut -d: -f 1,,2 /tmp/g", "a:b\nxyz\n:\n\nab\tcd\n", "", 0},
		{"cut -f -0 prints nothing", input + "cut -d: -f -0 /tmp/g", "\n\n\n\n\n", "", 0},
		{"cut decreasing range", input + "cut -c 3-1 /tmp/g", "", "cut: 1<2\n", 1},
		{"cut not a number", input + "cut -c a /tmp/g", "", "cut: invalid number 'a'\n", 1},
		{"cut two dashes", input + "cut -c 1-2-3 /tmp/g", "", "cut: invalid number '2-3'\n", 1},
		{"cut past int32", input + "cut -c 2147483648 /tmp/g", "", "cut: number 2147483648 is not in 0..2147483647 range\n", 1},
		{"cut -s drops lines without delimiter", input + "cut -s -d: -f 2 /tmp/g", "b\n\n\n", "", 0},
		{"cut -D keeps the list order", input + "cut -D -d: -f 3,1 /tmp/g", "c:a\nxyz\n:\n\nab\tcd\n", "", 0},
		{"cut -O", input + "cut -O + -d: -f 1,3 /tmp/g", "a+c\nxyz\n+\n\nab\tcd\n", "", 0},
		{"cut counts bytes", "printf 'h\\303\\251llo\\n' | cut -c 2-3", "\xc3\xa9\n", "", 0},
		{"cut missing file", "cut -c 1 /nope", "", "cut: /nope: No such file or directory\n", 1},
		{"cut without list", "cut /tmp", "", "cut: expected a list of bytes, characters, or fields\n", 1},

		{"shift -1 is an illegal number", `set -- a b; shift -1; echo "not reached"`, "", "sh: shift: Illegal number: -1\n", 2},
		{"shift x", `set -- a b; shift x; echo "not reached"`, "", "sh: shift: Illegal number: x\n", 2},
		{"shift +1", `set -- a b; shift +1`, "", "sh: shift: Illegal number: +1\n", 2},
		{"shift past $#", `set -- a b; shift 5; echo "st=$? $#"`, "st=1 2\n", "", 0},
		{"shift past int", `set -- a b; shift 99999999999999999999; echo "st=$? $#"`, "st=1 2\n", "", 0},
		{"shift all", `set -- a b; shift 2; echo "st=$? $#"`, "st=0 0\n", "", 0},
		{"shift 0", `set -- a b; shift 0; echo "st=$? $#"`, "st=0 2\n", "", 0},
		{"shift without parameters", `shift; echo "st=$?"`, "st=1\n", "", 0},

		// busybox's output: FIRST+i*INC stays at the same double for 1024 steps.
		{"seq near 2^63 ends", "seq 9223372036854775806 9223372036854775807 > /tmp/s; wc -l < /tmp/s; sort -u /tmp/s", "1025\n9223372036854775808\n", "", 0},
		{"seq decimals from the arguments", "seq 1 0.5 2", "1.0\n1.5\n2.0\n", "", 0},
		{"seq -w", "seq -w 8 10", "08\n09\n10\n", "", 0},
		{"seq -s", "seq -s , 1 3", "1,2,3\n", "", 0},
		{"seq negative first (busybox 1.36)", "seq -2 0", "-2\n-1\n0\n", "", 0},
		{"seq down", "seq 5 -2 1", "5\n3\n1\n", "", 0},
		{"seq nothing", "seq 3 1", "", "", 0},
		{"seq nan", "seq nan", "", "", 0},
		{"seq hex", "seq 0x3", "1\n2\n3\n", "", 0},
		{"seq out of range", "seq 1e400", "", seqUsageText, 1},
		{"seq not a number", "seq x", "", seqUsageText, 1},
		{"seq too many", "seq 1 2 3 4", "", seqUsageText, 1},

		{"printf trailing backslash", `printf 'a\\'`, `a\`, "", 0},
		{"here-document with an open $(", "cat <<EOF\n$(\nEOF\necho not reached", "", "sh: syntax error: unexpected end of file (expecting \")\")\n", 2},
		{"here-document with an open ${", "cat <<EOF\n${\nEOF", "", "sh: syntax error: missing '}'\n", 2},
		{"here-document with an open $((", "cat <<EOF\n$((\nEOF", "", "sh: syntax error: missing '))'\n", 2},
		{"here-document with an open backquote", "cat <<EOF\n`\nEOF", "", "sh: syntax error: EOF in backquote substitution\n", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runHostile(t, tc.script)
			if stdout != tc.stdout || stderr != tc.stderr || code != tc.code {
				t.Fatalf("got\n%q %q %d, want\n%q %q %d", stdout, stderr, code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

const seqUsageText = "BusyBox v1.36.1 (plugsim simulation) multi-call binary.\n\nUsage: seq [-w] [-s SEP] [FIRST [INC]] LAST\n\n" +
	"Print numbers from FIRST to LAST, in steps of INC.\nFIRST, INC default to 1.\n\n\t-w\tPad with leading zeros\n\t-s SEP\tString separator\n"

func TestSeq1e18Ends(t *testing.T) {
	stdout, _, code := runHostile(t, "seq 1e18 1e18")
	if want := strings.Repeat("1000000000000000000\n", 65); stdout != want || code != 0 {
		t.Fatalf("got %d bytes, code %d; want 65 lines of 1e18 (busybox)", len(stdout), code)
	}
}

// heapInUse is the heap in use after a collection.
// measuredAlone reruns the calling test by itself in a fresh test process, for a test that
// measures the whole process (heap, stacks): there, nothing of the other tests (their processes
// still ending, their buffers not yet collected) is counted as its own. It answers true in that
// process, where the test goes on; in the first it reports the rerun's result and answers false.
func measuredAlone(t *testing.T) bool {
	t.Helper()
	const env = "PLUGSIM_TEST_ALONE"
	if os.Getenv(env) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s alone in its own test process: %v\n%s", t.Name(), err, out)
	}
	t.Logf("alone in its own test process:\n%s", out)
	return false
}

// retained is what the process holds: the heap live at the last collection and the goroutine
// stacks in use. Garbage not yet collected does not count, so the figure does not depend on
// when the collector last ran (a loaded machine delays it, and a peak of HeapInuse then counts
// every dropped buffer since: 64 MiB for 16 MiB held, seen under load).
func retained() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// heapInUse is what the process holds after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	return retained()
}

// heapGrowth is how far the peak rose above base; a collection between the two readings can
// leave the peak below base, which is no growth (unsigned subtraction would wrap).
func heapGrowth(peak, base uint64) uint64 {
	if peak <= base {
		return 0
	}
	return peak - base
}

// watchHeap samples what the process holds (retained) until the test ends; the function it
// returns gives the highest sample so far.
func watchHeap(tb testing.TB) func() uint64 {
	var mu sync.Mutex
	// The first sample is taken before returning, so a command that ends before the watcher's
	// goroutine is first scheduled (a loaded machine) is still measured against something.
	peak := retained()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			r := retained()
			mu.Lock()
			peak = max(peak, r)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	tb.Cleanup(func() { close(stop); <-done })
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// TestExecSyncOutputIsBounded: ExecSync keeps MaxExecSyncOutput of stdout and stderr together
// and drops the rest without holding it; the command itself runs to its end.
func TestExecSyncOutputIsBounded(t *testing.T) {
	if !measuredAlone(t) {
		return
	}
	p := startProc(t, Spec{Args: []string{"sleep", "100000"}})
	base := heapInUse()
	peak := watchHeap(t)
	ctx := context.Background()

	out, errOut, code, err := p.ExecSync(ctx, []string{"head", "-c", "100000000", "/dev/zero"}, 0)
	if err != nil || code != 0 || len(out) != MaxExecSyncOutput || len(errOut) != 0 {
		t.Fatalf("100 MB on stdout: %d+%d bytes, code %d, %v; want %d bytes, 0", len(out), len(errOut), code, err, MaxExecSyncOutput)
	}
	out, errOut, code, _ = p.ExecSync(ctx, []string{"sh", "-c", "head -c 10000000 /dev/zero; head -c 10000000 /dev/zero >&2; echo end"}, 0)
	if code != 0 || len(out) != 10000000 || len(errOut) != MaxExecSyncOutput-10000000 {
		t.Fatalf("10 MB on each stream: %d+%d bytes, code %d; want %d+%d", len(out), len(errOut), code, 10000000, MaxExecSyncOutput-10000000)
	}

	// An endless writer, ended by the caller's deadline once it has produced past the bound.
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		// Cancel once the writer has written all it will (its sleep runs), or after a minute
		// (then the length check below fails).
		defer cancel()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for _, pi := range p.Processes() {
				if pi.Name == "sleep" && pi.PID != 1 {
					return
				}
			}
		}
	}()
	out, _, _, err = p.ExecSync(cctx, []string{"sh", "-c", "head -c 50000000 /dev/zero; sleep 1000"}, 0)
	if err != context.Canceled || len(out) != MaxExecSyncOutput {
		t.Fatalf("cancelled writer: %d bytes, %v", len(out), err)
	}
	out = nil
	// Up to two results alive at once (the last one not yet collected) and append's slack:
	// well under the 100 MB the first command wrote.
	if grown := heapGrowth(peak(), base); grown > 4*MaxExecSyncOutput {
		t.Fatalf("heap grew by %d MiB while collecting (bound %d MiB)", grown>>20, MaxExecSyncOutput>>20)
	}
}

// TestPidsLimit: a fork past the container's pids limit fails as in a pids cgroup at its limit.
func TestPidsLimit(t *testing.T) {
	stdout, stderr, code := runCmd(t, Spec{Args: []string{"sh", "-c", "for i in 1 2 3 4 5; do sleep 1000 & done; echo not reached"}, PidsLimit: 5})
	if stdout != "" || stderr != "sh: can't fork: Resource temporarily unavailable\n" || code != 2 {
		t.Fatalf("background past the limit: %q %q %d", stdout, stderr, code)
	}
	stdout, stderr, code = runCmd(t, Spec{Args: []string{"sh", "-c", "echo a | cat | cat | cat; echo st=$?"}, PidsLimit: 4})
	if stdout != "" || stderr != "sh: can't fork: Resource temporarily unavailable\n" || code != 2 {
		t.Fatalf("pipeline past the limit: %q %q %d", stdout, stderr, code)
	}

	// A container at its limit cannot exec either.
	var so syncBuffer
	p := startProc(t, Spec{Args: []string{"sh", "-c", "( while :; do sleep 1000 & done ) 2>/dev/null; echo full; wait"}, Stdout: &so, PidsLimit: 3})
	waitFor(t, "the container to fill up", func() bool { return so.String() == "full\n" })
	if n := len(p.Processes()); n != 3 {
		t.Fatalf("%d processes, want the limit, 3", n)
	}
	_, _, _, err := p.ExecSync(context.Background(), []string{"echo", "hi"}, 0)
	if err == nil || err.Error() != `exec: "echo": resource temporarily unavailable` {
		t.Fatalf("exec in a full container: %v", err)
	}
	p.Signal(9)
	p.Wait()
	out, _, code, err := (startProc(t, Spec{Args: []string{"sleep", "1000"}, PidsLimit: 3})).ExecSync(context.Background(), []string{"echo", "hi"}, 0)
	if err != nil || code != 0 || string(out) != "hi\n" {
		t.Fatalf("exec in another container: %q %d %v", out, code, err)
	}
}

// TestPidsLimitBoundsMemory: the fork loops of the issue stop at the default limit, and what they
// hold is freed when the container ends.
func TestPidsLimitBoundsMemory(t *testing.T) {
	if !measuredAlone(t) {
		return
	}
	base := heapInUse()
	peak := watchHeap(t)
	var so syncBuffer
	p := startProc(t, Spec{Args: []string{"sh", "-c", "( while :; do sleep 1000 & done ) 2>/dev/null; echo full; wait"}, Stdout: &so})
	waitFor(t, "the container to fill up", func() bool { return so.String() == "full\n" })
	if n := len(p.Processes()); n != DefaultPidsLimit {
		t.Fatalf("%d processes, want DefaultPidsLimit (%d)", n, DefaultPidsLimit)
	}
	held := heapInUse() - base
	t.Logf("%d processes hold %d KiB (%d B each)", DefaultPidsLimit, held>>10, held/DefaultPidsLimit)
	if held > 64<<20 {
		t.Fatalf("%d processes hold %d MiB", DefaultPidsLimit, held>>20)
	}
	p.Signal(9)
	p.Wait()

	// The pipeline fork bomb runs into the same limit.
	stdout, _, code := runCmd(t, Spec{Args: []string{"sh", "-c", "f() { f | f; }; f 2>/dev/null; echo survived"}})
	if stdout != "survived\n" || code != 0 {
		t.Fatalf("f | f: %q %d", stdout, code)
	}
	if grown := heapGrowth(peak(), base); grown > 128<<20 {
		t.Fatalf("heap grew by %d MiB", grown>>20)
	}
	waitFor(t, "the processes' memory to be freed", func() bool { return heapInUse() < base+16<<20 })
}

func TestPidsLimitFromCRI(t *testing.T) {
	tests := []struct {
		unified map[string]string
		want    int
	}{
		{nil, 0}, {map[string]string{"memory.max": "1"}, 0}, {map[string]string{"pids.max": "100"}, 100},
		{map[string]string{"pids.max": " 7\n"}, 7}, {map[string]string{"pids.max": "max"}, MaxPidsLimit},
		{map[string]string{"pids.max": "99999999"}, MaxPidsLimit}, {map[string]string{"pids.max": "x"}, 0},
		{map[string]string{"pids.max": "0"}, 0}, {map[string]string{"pids.max": "-5"}, 0},
	}
	for _, tc := range tests {
		if got := PidsLimit(&runtimeapi.LinuxContainerResources{Unified: tc.unified}); got != tc.want {
			t.Errorf("unified %v: %d, want %d", tc.unified, got, tc.want)
		}
	}
	spec, err := FromCRI(&runtimeapi.ContainerConfig{Command: []string{"sh"}, Linux: &runtimeapi.LinuxContainerConfig{
		Resources: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"pids.max": "7"}}}}, &runtimeapi.PodSandboxConfig{}, ImageConfig{}, nil)
	if err != nil || spec.PidsLimit != 7 {
		t.Fatalf("FromCRI: PidsLimit %d, %v", spec.PidsLimit, err)
	}
}

// TestHeldInputIsBounded: what the shell and the applets hold whole is bounded by maxHeldBytes;
// what streams (wc, tr, head, cat) holds nothing of its input.
func TestHeldInputIsBounded(t *testing.T) {
	if !measuredAlone(t) {
		return
	}
	tests := []struct {
		name, script, stdout, stderr string
		code                         int
	}{
		{"command substitution", "x=$(cat /dev/zero); echo not reached", "", "sh: out of memory\n", 2},
		{"doubling a variable", "a=x; while :; do a=$a$a; done", "", "sh: out of memory\n", 2},
		{"read of an endless line", "read x < /dev/zero; echo st=$?", "st=1\n", "sh: read: out of memory\n", 0},
		{"a script that never ends", "sh /dev/zero", "", "sh: can't open '/dev/zero': out of memory\n", 2},
		{"sort of an endless input", "head -c 20000000 /dev/zero | sort", "", "sort: out of memory\n", 1},
		{"tail of an endless input", "head -c 20000000 /dev/zero | tail -n 1", "", "tail: out of memory\n", 0},
		{"cut of an endless line", "head -c 20000000 /dev/zero | cut -c 1", "", "cut: -: line too long\n", 1},
		{"wc streams", "head -c 40000000 /dev/zero | wc -c", "40000000\n", "", 0},
		{"tr streams", "head -c 40000000 /dev/zero | tr '\\000' a | wc -c", "40000000\n", "", 0},
		{"head streams a line without end", "head -c 40000000 /dev/zero | head -n 1 | wc -c", "40000000\n", "", 0},
		{"a long but bounded substitution", "x=$(head -c 1000000 /dev/zero | tr '\\000' a); echo ${#x}", "1000000\n", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := heapInUse()
			peak := watchHeap(t)
			stdout, stderr, code := runHostile(t, tc.script)
			if stdout != tc.stdout || stderr != tc.stderr || code != tc.code {
				t.Fatalf("got %q %q %d, want %q %q %d", stdout, stderr, code, tc.stdout, tc.stderr, tc.code)
			}
			// What streams holds a buffer, never its 40 MB input; what holds a whole thing
			// holds a few copies of at most maxHeldBytes (a string, its builder, growth slack)
			// and the garbage the collector has not taken yet (measured: 88 MiB at most), never
			// an endless input.
			bound := uint64(8 * kernel.MaxHeldBytes)
			if strings.HasSuffix(tc.name, "streams") || strings.Contains(tc.name, "streams ") {
				bound = 16 << 20
			}
			if grown := heapGrowth(peak(), base); grown > bound {
				t.Fatalf("heap grew by %d MiB (bound %d MiB)", grown>>20, bound>>20)
			}
		})
	}
}
