package cgrouptree

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// A process in a cgroup two levels down is killed by Kill, and Remove takes the whole tree.
func TestKillAndRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroups")
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	hier := ""
	for _, m := range mounts {
		if m.FSType == "cgroup" && strings.Contains(","+m.SuperOpts+",", ",pids,") || m.FSType == "cgroup2" && m.MountPoint == "/sys/fs/cgroup" {
			hier = m.MountPoint
			break
		}
	}
	if hier == "" {
		t.Skip("no pids cgroup hierarchy (v1) or cgroup v2 at /sys/fs/cgroup")
	}
	top := filepath.Join(hier, "plugsim-cgrouptree-test-"+filepath.Base(filepath.Dir(t.TempDir())))
	leaf := filepath.Join(top, "a", "b")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(top) })
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sleep.Wait(); close(done) }()
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
		sleep.Process.Kill()
		t.Fatal(err)
	}
	if n := Kill(top); n != 1 {
		t.Errorf("Kill signalled %d processes, want the one sleep", n)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the sleep outlived Kill")
	}
	if err := Remove(top); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("%s after Remove: %v", top, err)
	}
	if err := Remove(top); err != nil {
		t.Errorf("Remove of a tree already gone: %v", err)
	}
}
