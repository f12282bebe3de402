package process

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/containerio"
)

// closeBuffer is an attach session's output: a buffer that knows it was closed.
type closeBuffer struct {
	syncBuffer
	mu     sync.Mutex
	closed bool
}

func (c *closeBuffer) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *closeBuffer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func TestContainerIOAttach(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "c.log")
	logw, err := containerio.NewLogWriter(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logw.Close()
	cio := containerio.NewContainerIO(logw, true, false)
	p := startProc(t, Spec{Args: []string{"/bin/sh"}, Stdin: cio.Stdin(), Stdout: cio.Stdout(), Stderr: cio.Stderr()})
	go func() { p.Wait(); cio.Close() }()

	// First session (critest "attach"): write a command, read exactly its output,
	// then end the input: without stdinOnce the session detaches, the shell lives on.
	inR, inW := io.Pipe()
	out := &closeBuffer{}
	done := make(chan error, 1)
	go func() { done <- cio.Attach(context.Background(), inR, out, nil, false) }()
	io.WriteString(inW, "echo -n hello\n")
	waitFor(t, "attach output", func() bool { return out.String() == "hello" })
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !out.isClosed() {
		t.Error("session output not closed on detach")
	}
	if _, exited := p.ExitCode(); exited {
		t.Fatal("the shell ended when a non-stdinOnce session detached")
	}

	// Second session with stdinOnce: end of input closes the shell's stdin and
	// the session lasts until the container ends.
	inR2, inW2 := io.Pipe()
	out2 := &closeBuffer{}
	done2 := make(chan error, 1)
	go func() { done2 <- cio.Attach(context.Background(), inR2, out2, nil, true) }()
	io.WriteString(inW2, "echo bye >&2; echo out\n")
	inW2.Close()
	select {
	case <-done2:
	case <-time.After(hangBound):
		t.Fatal("stdinOnce session did not end with the container")
	}
	if code := p.Wait(); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if out2.String() != "out\n" || !out2.isClosed() {
		t.Errorf("second session stdout %q closed %v", out2.String(), out2.isClosed())
	}
	data, _ := os.ReadFile(logPath)
	// "hello" had no newline, so it joins the next line.
	for _, want := range []string{" stderr F bye\n", " stdout F helloout\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("log misses %q: %q", want, data)
		}
	}
	// Attaching to an ended container returns at once.
	out3 := &closeBuffer{}
	if err := cio.Attach(context.Background(), nil, out3, nil, false); err != nil || !out3.isClosed() {
		t.Errorf("attach after exit: %v closed %v", err, out3.isClosed())
	}
}

// TestContainerIONoStdin: an attach to a container without stdin ignores the
// input and lasts until its context ends. It runs in a synctest bubble, so
// synctest.Wait returns once the attach has done all it would do on its own.
func TestContainerIONoStdin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cio := containerio.NewContainerIO(nil, false, false)
		if cio.Stdin() != nil {
			t.Fatal("stdin without the stdin flag")
		}
		p := startProc(t, Spec{Args: []string{"sh", "-c", "echo x; sleep 1000"}, Stdin: cio.Stdin(), Stdout: cio.Stdout(), Stderr: cio.Stderr()})
		out := &closeBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cio.Attach(ctx, strings.NewReader("ignored\n"), out, nil, false) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("attach ended before its context: %v", err)
		default:
		}
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("attach after cancel: %v", err)
		}
		p.Signal(9)
		p.Wait()
		cio.Close()
	})
}

// TestLogWriterWithProcess wires a looping process to a log, as the runtime
// does for log_path, and checks kubelet's line format.
func TestLogWriterWithProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.log")
	w, err := containerio.NewLogWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	so, se := w.Stream(containerio.Stdout), w.Stream(containerio.Stderr)
	p := startProc(t, Spec{Args: []string{"sh", "-c", "echo out; echo err >&2; while true; do echo tick; sleep 0.01; done"}, Stdout: so, Stderr: se})
	waitFor(t, "ticks", func() bool {
		data, _ := os.ReadFile(path)
		return strings.Count(string(data), "tick") >= 2
	})
	p.Signal(syscall.SIGTERM)
	p.Wait()
	so.Close()
	se.Close()
	data, _ := os.ReadFile(path)
	line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) (stdout|stderr) [FP] .*$`)
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !line.MatchString(l) {
			t.Errorf("not a CRI log line: %q", l)
		}
	}
	if !strings.Contains(string(data), " stdout F out\n") || !strings.Contains(string(data), " stderr F err\n") {
		t.Errorf("log = %q", data)
	}
}
