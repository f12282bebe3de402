package process

import (
	"context"
	"syscall"
	"testing"
)

// TestInitImmuneFromInside (issue 17): a signal sent from inside the container's pid namespace
// (an exec, or a shell an exec started) reaches pid 1 only if pid 1 has a handler for it, and
// KILL never (pid_namespaces(7)); kill -1 leaves pid 1 out (kill(2)). The other processes get
// the signal, and from outside (StopContainer: Process.Signal) KILL still ends pid 1.
func TestInitImmuneFromInside(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  []string
		// sibling: the exec running `sleep 1000` beside pid 1 is signalled too.
		sibling bool
	}{
		{"kill -9 1", []string{"kill", "-9", "1"}, false},
		{"kill -KILL 1", []string{"kill", "-KILL", "1"}, false},
		{"kill 1 (TERM, no handler)", []string{"kill", "1"}, false},
		{"kill -INT 1", []string{"kill", "-INT", "1"}, false},
		{"kill -9 0", []string{"kill", "-9", "0"}, true},
		{"kill -9 -1", []string{"kill", "-9", "-1"}, true},
		{"kill -TERM 0", []string{"kill", "-TERM", "0"}, true},
		{"from a child shell", []string{"sh", "-c", "kill -9 1; kill -9 0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, Spec{Args: []string{"sleep", "1000"}, FS: newFS(t, FSConfig{})})
			ctx := context.Background()
			bg, err := p.Exec(ctx, ExecSpec{Args: []string{"sleep", "1000"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bg.Signal(syscall.SIGKILL); bg.Wait() })
			_, _, _, err = p.ExecSync(ctx, tc.cmd, 0)
			if err != nil {
				t.Fatalf("%q: %v", tc.cmd, err)
			}
			// Delivery is synchronous: the kill applet has cancelled whatever it
			// terminated before ExecSync returned.
			if cause := p.t.ctx.Err(); cause != nil {
				t.Fatalf("%q from an exec ended pid 1: %v", tc.cmd, cause)
			}
			if tc.sibling {
				if code := bg.Wait(); code != 128+9 && code != 128+15 {
					t.Errorf("%q: the sibling exec ended with %d, want 137 or 143", tc.cmd, code)
				}
			} else if bg.t.ctx.Err() != nil {
				t.Errorf("%q: the sibling exec ended too", tc.cmd)
			}
			// From outside, the stop still works.
			p.Signal(syscall.SIGKILL)
			if code := p.Wait(); code != 137 {
				t.Errorf("KILL from outside: exit %d, want 137", code)
			}
		})
	}

	// A handler pid 1 installed does get the signal from inside.
	var out syncBuffer
	p := startProc(t, Spec{Args: []string{"sh", "-c", "trap 'echo got USR1; exit 3' USR1; while true; do sleep 0.1; done"}, Stdout: &out, FS: newFS(t, FSConfig{})})
	waitFor(t, "the trap", func() bool {
		p.t.mu.Lock()
		defer p.t.mu.Unlock()
		return p.t.handler != nil
	})
	if _, _, code, err := p.ExecSync(context.Background(), []string{"kill", "-USR1", "1"}, 0); err != nil || code != 0 {
		t.Fatalf("kill -USR1 1: code %d, %v", code, err)
	}
	if code := p.Wait(); code != 3 || out.String() != "got USR1\n" {
		t.Errorf("pid 1 with a USR1 trap: exit %d, stdout %q; want 3, \"got USR1\\n\"", code, out.String())
	}
}
