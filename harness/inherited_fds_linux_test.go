package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestInheritedDescriptorsStayWithTheHarness: a descriptor the harness's caller left open (as flock(1)
// leaves its lock's) reaches the programs the harness starts until closeInheritedOnExec marks it, and
// not after.
func TestInheritedDescriptorsStayWithTheHarness(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil { // no O_CLOEXEC: as a caller's descriptor arrives
		t.Fatal(err)
	}
	const fd = 100 // far above what the child opens itself
	if err := syscall.Dup2(p[0], fd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(p[0]); syscall.Close(p[1]); syscall.Close(fd) })
	childFDs := func() []string {
		out, err := exec.Command("ls", "/proc/self/fd").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))
	}
	has := func(fds []string) bool {
		for _, f := range fds {
			if f == "100" {
				return true
			}
		}
		return false
	}
	if fds := childFDs(); !has(fds) {
		t.Fatalf("before: the child has %v, not the inherited fd %d: the test shows nothing", fds, fd)
	}
	closeInheritedOnExec()
	if fds := childFDs(); has(fds) {
		t.Errorf("after closeInheritedOnExec the child still has fd %d (its fds: %v)", fd, fds)
	}
}
