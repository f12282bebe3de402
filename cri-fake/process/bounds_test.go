package process

import (
	"context"
	"strings"
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
			if cause := p.Ended(); cause != nil {
				t.Fatalf("%q from an exec ended pid 1: %v", tc.cmd, cause)
			}
			if tc.sibling {
				if code := bg.Wait(); code != 128+9 && code != 128+15 {
					t.Errorf("%q: the sibling exec ended with %d, want 137 or 143", tc.cmd, code)
				}
			} else if bg.Ended() != nil {
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
	waitFor(t, "the trap", p.HasSignalHandler)
	if _, _, code, err := p.ExecSync(context.Background(), []string{"kill", "-USR1", "1"}, 0); err != nil || code != 0 {
		t.Fatalf("kill -USR1 1: code %d, %v", code, err)
	}
	if code := p.Wait(); code != 3 || out.String() != "got USR1\n" {
		t.Errorf("pid 1 with a USR1 trap: exit %d, stdout %q; want 3, \"got USR1\\n\"", code, out.String())
	}
}

// TestMvRefusesRootMountsAndItself (issue 17): rename(2) of the root or a mount point is EBUSY,
// of a directory into itself EINVAL, and nothing moves.
func TestMvRefusesRootMountsAndItself(t *testing.T) {
	for _, tc := range []struct {
		name, script, stderr string
		noMounts             bool // the root is busy with no other mount to find
	}{
		{"the root", "mv / /x", "mv: can't rename '/': Resource busy\n", true},
		{"the root into a directory", "mkdir /d && mv / /d", "mv: can't rename '/': Resource busy\n", true},
		{"the root, with mounts", "mv / /x", "mv: can't rename '/': Resource busy\n", false},
		{"a mount point", "mv /data /moved", "mv: can't rename '/data': Resource busy\n", false},
		{"a parent of a mount point", "mv /mnt /moved", "mv: can't rename '/mnt': Resource busy\n", false},
		{"a directory into itself", "mkdir -p /tmp/a/b && mv /tmp/a /tmp/a/b/c", "mv: can't rename '/tmp/a': Invalid argument\n", true},
		{"a directory into its own child directory", "mkdir -p /tmp/a/b && mv /tmp/a /tmp/a/b", "mv: can't rename '/tmp/a': Invalid argument\n", true},
		{"a directory into a host mount inside it", "mkdir -p /data/a/b && mv /data/a /data/a/b", "mv: can't rename '/data/a': Invalid argument\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := FSConfig{Hostname: "testhost", Mounts: []Mount{
				{ContainerPath: "/data", HostPath: t.TempDir()},
				{ContainerPath: "/mnt/inner", HostPath: t.TempDir()},
			}}
			if tc.noMounts {
				cfg.Mounts = nil
			}
			fsys := newFS(t, cfg)
			_, stderr, code := sh(t, fsys, tc.script)
			if code != 1 || stderr != tc.stderr {
				t.Errorf("%s: exit %d, stderr %q; want 1, %q", tc.script, code, stderr, tc.stderr)
			}
			// Nothing moved: the tree is where it was.
			stdout, _, _ := sh(t, fsys, "ls -d /bin /etc /tmp; ls -d /data /mnt/inner /x /moved /d/bin 2>&1")
			want := []string{"/bin\n", "/etc\n", "/tmp\n"}
			if !tc.noMounts {
				want = append(want, "/data\n", "/mnt/inner\n")
			}
			for _, want := range want {
				if !strings.Contains(stdout, want) {
					t.Errorf("after %s, %s is gone: %q", tc.script, strings.TrimSpace(want), stdout)
				}
			}
			for _, gone := range []string{"/x\n", "/moved\n", "/d/bin\n"} {
				if strings.Contains(stdout, gone) {
					t.Errorf("after %s, %s exists: %q", tc.script, strings.TrimSpace(gone), stdout)
				}
			}
		})
	}
}
