package process

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/internal/crashtest"
)

// ipcFS is a busybox view whose image also has util-linux's ipcmk (busybox has none).
func ipcFS(tb testing.TB) *FS {
	tb.Helper()
	layer, err := ImageLayer(ImageConfig{Behavior: []byte(`{"executables": {"/usr/bin/ipcmk": "ipcmk"}}`)})
	if err != nil {
		tb.Fatal(err)
	}
	return newFS(tb, FSConfig{Image: layer})
}

func inIPC(tb testing.TB, ns *IPCNamespace, script string) (string, string, int) {
	tb.Helper()
	return runCmd(tb, Spec{Args: []string{"sh", "-c", script}, FS: ipcFS(tb), IPCNamespace: ns})
}

// TestIPCNamespaces: a segment made in a pod's IPC namespace is listed by its other
// containers and not by another pod's or a container with a namespace of its own; ids
// follow the kernel's index + sequence<<15.
func TestIPCNamespaces(t *testing.T) {
	pod, other := NewIPCNamespace(), NewIPCNamespace()
	out, stderr, code := inIPC(t, pod, "ipcmk -M 1048576 && ipcmk -Q -S 3")
	if code != 0 || out != "Shared memory id: 0\nMessage queue id: 0\nSemaphore id: 0\n" {
		t.Fatalf("ipcmk: %d %q %q", code, out, stderr)
	}
	out, _, _ = inIPC(t, pod, "ipcmk -M 4096")
	if out != "Shared memory id: 32769\n" {
		t.Fatalf("second segment: %q", out)
	}
	out, _, code = inIPC(t, pod, "ipcs -m")
	row := regexp.MustCompile(`(?m)^0x[0-9a-f]{8} 0          root       644        1048576    0                       \n`)
	if code != 0 || !strings.HasPrefix(out, "\n------ Shared Memory Segments --------\nkey        shmid      owner      perms      bytes      nattch     status      \n") || !row.MatchString(out) || !strings.Contains(out, " 32769 ") {
		t.Fatalf("ipcs -m in the pod:\n%s", out)
	}
	out, _, _ = inIPC(t, pod, "ipcs")
	for _, want := range []string{"------ Message Queues --------\nkey        msqid      owner      perms      used-bytes   messages    \n0x", "------ Semaphore Arrays --------\nkey        semid      owner      perms      nsems     \n0x"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ipcs lacks %q:\n%s", want, out)
		}
	}
	for name, ns := range map[string]*IPCNamespace{"another pod": other, "a container's own": nil} {
		if out, _, _ := inIPC(t, ns, "ipcs -m"); strings.Contains(out, "0x") {
			t.Errorf("%s namespace lists the pod's segments:\n%s", name, out)
		}
	}
	for _, tc := range []struct{ script, stderr string }{
		{"ipcmk", "ipcmk: bad usage\nTry 'ipcmk --help' for more information.\n"},
		{"ipcmk -M 0", "ipcmk: create share memory failed: Invalid argument\n"},
		{"ipcmk -M 1x", "ipcmk: failed to parse size: '1x'\n"},
		{"ipcmk -S 40000", "ipcmk: create semaphore failed: Invalid argument\n"},
		{"ipcs -t", "ipcs: -t is not simulated (only the default format: -a -q -m -s)\n"},
	} {
		if _, stderr, code := inIPC(t, NewIPCNamespace(), tc.script); code != 1 || stderr != tc.stderr {
			t.Errorf("%s: %d %q; want 1 %q", tc.script, code, stderr, tc.stderr)
		}
	}
	if out, _, _ := inIPC(t, NewIPCNamespace(), "ipcmk -M 1MiB -p 600 >/dev/null; ipcs -m"); !strings.Contains(out, " 600        1048576 ") {
		t.Errorf("ipcmk -M 1MiB -p 600:\n%s", out)
	}
}

// TestIPCNamespaceBound: a namespace holds at most MaxIPCObjects of a kind (SHMMNI);
// the next create fails with ENOSPC.
func TestIPCNamespaceBound(t *testing.T) {
	ns := NewIPCNamespace()
	_, stderr, code := inIPC(t, ns, "i=0; while [ $i -lt 4096 ]; do ipcmk -M 1 >/dev/null || exit 9; i=$((i+1)); done; ipcmk -M 1")
	if code != 1 || stderr != "ipcmk: create share memory failed: No space left on device\n" {
		t.Fatalf("past the bound: %d %q", code, stderr)
	}
}

// TestNodeIPCNamespace: hostIPC's namespace lists the node's own segments (its
// /proc/sysvipc) besides the simulation's, and gives a new one an index the node does not
// use.
func TestNodeIPCNamespace(t *testing.T) {
	dir := t.TempDir()
	shm := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		" 235193155          0   644               1048576  6800     0      0     0     0     0     0          0          0 1796183840                     0                     0\n" +
		"-497525980      32769   600                  4096  6897     0      0  1000     0     0     0          0          0 1796183843                     0                     0\n"
	if err := os.WriteFile(filepath.Join(dir, "shm"), []byte(shm), 0o644); err != nil {
		t.Fatal(err)
	}
	node := NewNodeIPCNamespace(dir)
	out, _, _ := inIPC(t, node, "ipcmk -M 10 && ipcs -m")
	for _, want := range []string{
		"Shared memory id: 2\n",
		"0x0e04c343 0          root       644        1048576    0                       \n",
		"0xe2585b24 32769      1000       600        4096       0                       \n",
		" 2          root       644        10         0 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("node namespace lacks %q:\n%s", want, out)
		}
	}
	if out, _, _ := inIPC(t, NewIPCNamespace(), "ipcs -m"); strings.Contains(out, "0x0e04c343") {
		t.Errorf("a pod's namespace lists the node's segment:\n%s", out)
	}
}

// FuzzIPCTools runs ipcmk then ipcs with hostile arguments in a fresh IPC namespace: each
// ends 0 or 1 with no defect of the simulation, and what ipcmk prints on success is one
// "… id: N" line per object made, each then listed by ipcs.
func FuzzIPCTools(f *testing.F) {
	for _, s := range []string{"-M 1048576", "-Q -S 3 -p 600", "-M 16EiB", "-M 15EiB -Q -S 1 -p 7777777777", "-M 1E -S 32001",
		"-S 0", "-S -1", "-M", "-x", "-M 1KB -M 2K", "-p -Q", "-- -M 1", "-MQ"} {
		f.Add(s, "-m")
	}
	f.Add("-Q", "-a -i 1 -z")
	idLine := regexp.MustCompile(`^(Shared memory|Message queue|Semaphore) id: ([0-9]+)$`)
	f.Fuzz(func(t *testing.T, mkArgs, lsArgs string) {
		if len(mkArgs)+len(lsArgs) > 1024 {
			return
		}
		var log crashtest.Log
		ns := NewIPCNamespace()
		run := func(args []string) (string, int) {
			var so, se syncBuffer
			p, err := Start(context.Background(), Spec{Args: args, FS: ipcFS(t), IPCNamespace: ns, Stdout: &so, Stderr: &se,
				Logf: log.Logf})
			if err != nil {
				t.Fatal(err)
			}
			code := p.Wait()
			if log.String() != "" {
				t.Fatalf("%q crashed the simulation: %s", args, log.String())
			}
			if code != 0 && code != 1 {
				t.Fatalf("%q: exit %d, stderr %q", args, code, se.String())
			}
			return so.String(), code
		}
		out, code := run(append([]string{"/usr/bin/ipcmk"}, strings.Fields(mkArgs)...))
		listed, _ := run([]string{"ipcs"})
		if code != 0 {
			return
		}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			m := idLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("ipcmk %s printed %q", mkArgs, out)
			}
			if !strings.Contains(listed, " "+m[2]+" ") {
				t.Fatalf("ipcmk %s made %s, ipcs lists:\n%s", mkArgs, m[2], listed)
			}
		}
		run(append([]string{"ipcs"}, strings.Fields(lsArgs)...))
	})
}
