package hostproc

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sleep", "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	start, err := Start(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(pid, start, dir); err != nil {
		t.Errorf("the process itself: %v", err)
	}
	if err := Verify(pid, start+1, dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("another start time: %v, want ErrNotExist (the pid is someone else's now)", err)
	}
	if err := Verify(pid, start, t.TempDir()); err == nil || errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "works in "+dir) {
		t.Errorf("another directory: %v, want an error naming where it works", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := Verify(pid, start, dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after it exited: %v, want ErrNotExist", err)
	}
}
