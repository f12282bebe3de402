package process

import (
	"context"
	"strings"
	"testing"
	"time"
)

// waitExit waits for p to end (a hang past hangBound fails: an OOM kill that never comes).
func waitExit(tb testing.TB, p *Process) int {
	tb.Helper()
	select {
	case <-p.Done():
	case <-time.After(hangBound):
		tb.Fatalf("%v did not end in %v", p.Processes(), hangBound)
	}
	code, _ := p.ExitCode()
	return code
}

// TestOOMKillsCritestCommand: critest's "Container OOM" command, `dd if=/dev/zero
// of=/dev/null bs=20M` under a 15 MiB limit, is killed by the OOM killer (137, OOMKilled);
// the same command without a limit runs (here for two blocks) and is not.
func TestOOMKillsCritestCommand(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sh", "-c", "dd if=/dev/zero of=/dev/null bs=20M"}, MemoryLimit: 15 << 20})
	if code := waitExit(t, p); code != 137 || !p.OOMKilled() {
		t.Fatalf("dd bs=20M under 15 MiB: exit %d, OOMKilled %v; want 137, true", code, p.OOMKilled())
	}
	stdout, stderr, code := runCmd(t, Spec{Args: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=20M", "count=2", "status=noxfer"}})
	if code != 0 || stdout != "" || stderr != "2+0 records in\n2+0 records out\n" {
		t.Fatalf("dd without a limit: %d %q %q", code, stdout, stderr)
	}
	stdout, stderr, code = runCmd(t, Spec{Args: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=10M", "count=1", "status=noxfer"}, MemoryLimit: 15 << 20})
	if code != 0 || stderr != "1+0 records in\n1+0 records out\n" {
		t.Fatalf("dd bs=10M under 15 MiB: %d %q %q", code, stdout, stderr)
	}
}

// TestOOMStatsClimbThenKill: writes to /dev/shm are the container's memory: Stats climbs
// with each, and the write that takes it past the limit kills the container (a tmpfs page
// cannot be reclaimed without swap). Writes elsewhere in its own files keep their ENOSPC
// bound and kill nothing.
func TestOOMStatsClimbThenKill(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sleep", "100000"}, MemoryLimit: 32 << 20})
	ctx := context.Background()
	last := p.Stats().MemoryBytes
	for i, f := range []string{"a", "b", "c"} {
		_, stderr, code, err := p.ExecSync(ctx, []string{"dd", "if=/dev/zero", "of=/dev/shm/" + f, "bs=1M", "count=4", "status=none"}, 0)
		if err != nil || code != 0 {
			t.Fatalf("write %d: %d %q %v", i, code, stderr, err)
		}
		now := p.Stats().MemoryBytes
		if now < last+4<<20 {
			t.Fatalf("write %d of 4 MiB: memory went from %d to %d", i, last, now)
		}
		last = now
	}
	_, stderr, code, _ := p.ExecSync(ctx, []string{"dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=40", "status=none"}, 0)
	if code != 1 || !strings.Contains(string(stderr), "No space left on device") || p.OOMKilled() {
		t.Fatalf("/tmp past the limit: %d %q OOMKilled %v; want ENOSPC and no kill", code, stderr, p.OOMKilled())
	}
	if _, _, code, err := p.ExecSync(ctx, []string{"rm", "/tmp/big"}, 0); code != 0 || err != nil {
		t.Fatalf("rm: %d %v", code, err)
	}
	p.ExecSync(ctx, []string{"dd", "if=/dev/zero", "of=/dev/shm/d", "bs=1M", "count=40", "status=none"}, 0)
	if code := waitExit(t, p); code != 137 || !p.OOMKilled() {
		t.Fatalf("/dev/shm past the limit: exit %d, OOMKilled %v; want 137, true", code, p.OOMKilled())
	}
}

// TestOOMLowerLimitAndBehaviour: a limit lowered below what the container holds kills it
// (UpdateContainerResources), and so does starting an image whose behaviour's memoryBytes
// alone is past the limit; a limit above both kills nothing.
func TestOOMLowerLimitAndBehaviour(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sleep", "100000"}, Behaviour: Behaviour{MemoryBytes: 20 << 20}, MemoryLimit: 64 << 20})
	p.SetMemoryLimit(48 << 20)
	if _, done := p.ExitCode(); done || p.OOMKilled() {
		t.Fatal("a limit above the usage killed the container")
	}
	p.SetMemoryLimit(16 << 20)
	if code := waitExit(t, p); code != 137 || !p.OOMKilled() {
		t.Fatalf("limit lowered below the usage: exit %d, OOMKilled %v", code, p.OOMKilled())
	}
	q := startProc(t, Spec{Args: []string{"sleep", "100000"}, Behaviour: Behaviour{MemoryBytes: 128 << 20}, MemoryLimit: 64 << 20})
	if code := waitExit(t, q); code != 137 || !q.OOMKilled() {
		t.Fatalf("behaviour of 128 MiB under 64 MiB: exit %d, OOMKilled %v", code, q.OOMKilled())
	}
}

// TestOOMKillsEveryProcess: the OOM killer ends every process of the container, as a
// memory.oom.group cgroup does: an exec that allocates past the limit takes the main
// process with it.
func TestOOMKillsEveryProcess(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sh", "-c", "sleep 100000 & wait"}, MemoryLimit: 8 << 20})
	_, _, code, _ := p.ExecSync(context.Background(), []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=9M", "count=1"}, 0)
	if code != 137 {
		t.Fatalf("the exec that allocated: exit %d, want 137", code)
	}
	if code := waitExit(t, p); code != 137 {
		t.Fatalf("main process: exit %d, want 137", code)
	}
	waitFor(t, "the background sleep to end", func() bool { return len(p.Processes()) == 0 })
}

// TestDd: busybox dd's operands and messages.
func TestDd(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		stdin          string
		stdout, stderr string
		code           int
	}{
		{[]string{"bs=2", "count=2", "status=noxfer"}, "abcdef", "abcd", "2+0 records in\n2+0 records out\n", 0},
		{[]string{"bs=4", "skip=1", "status=noxfer"}, "abcdefghij", "efghij", "1+1 records in\n1+1 records out\n", 0},
		{[]string{"bs=1k", "status=none"}, "x", "x", "", 0},
		{[]string{"bs=1", "count=2", "of=/dev/stdout", "status=none"}, "xyz", "xy", "", 0},
		{[]string{"bs=0"}, "", "", "dd: invalid number '0'\n", 1},
		{[]string{"bs=99999999999999999999"}, "", "", "dd: invalid number '99999999999999999999'\n", 1},
		{[]string{"count=x"}, "", "", "dd: invalid number 'x'\n", 1},
		{[]string{"nope"}, "", "", "dd: invalid argument 'nope'\n", 1},
		{[]string{"if=/nonexistent"}, "", "", "dd: can't open '/nonexistent': No such file or directory\n", 1},
		{[]string{"of=/proc/x", "status=none"}, "", "", "dd: can't open '/proc/x': Read-only file system\n", 1},
	} {
		stdout, stderr, code := runCmd(t, Spec{Args: append([]string{"dd"}, tc.args...), Stdin: strings.NewReader(tc.stdin)})
		if stdout != tc.stdout || stderr != tc.stderr || code != tc.code {
			t.Errorf("dd %q: %d %q %q; want %d %q %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	_, stderr, code := runCmd(t, Spec{Args: []string{"dd", "if=/dev/zero", "of=/dev/full", "bs=1", "count=1", "status=noxfer"}})
	if code != 1 || stderr != "dd: /dev/full: No space left on device\n0+0 records in\n0+0 records out\n" {
		t.Errorf("dd to /dev/full: %d %q", code, stderr)
	}
}
