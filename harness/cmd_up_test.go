package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/harness/wiring"
	"github.com/plugsim/plugsim/internal/hostproc"
	"github.com/plugsim/plugsim/internal/localuser"
)

// wantRefusal fails unless err refuses dir naming the other user and a mode.
func wantRefusal(t *testing.T, err error, dir string, u *localuser.User) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted %s, which %s made", dir, u)
	}
	for _, s := range []string{"refusing state directory " + dir, u.Name, "mode d"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not name %q", err, s)
		}
	}
}

// Issue 24, 1: another user runs `mkdir /tmp/plugsim`, puts a script where the CNI plugin goes, and
// root runs `harness up` on it: refused before anything runs, naming the user and the mode; the script
// never runs and root writes nothing there.
func TestUpRefusesADirectoryAnotherUserMade(t *testing.T) {
	u := localuser.New(t)
	dir := localuser.TempDir(t, "plugsim-node")
	ran := filepath.Join(dir, "ran-as-root")
	u.Shell(t, "mkdir -p "+dir+"/opt/cni/bin && printf '#!/bin/sh\\nid > "+ran+"\\n' > "+dir+"/opt/cni/bin/cni-fake && chmod 755 "+dir+"/opt/cni/bin/cni-fake")
	wantRefusal(t, cmdUp([]string{"--dir", dir, "--follow=false"}), dir, u)
	for _, p := range []string{ran, filepath.Join(dir, wiring.StateFile), filepath.Join(dir, "run"), filepath.Join(dir, "crictl.yaml")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after the refused harness up", p)
		}
	}
}

// Issue 24, 1: the user makes crictl.yaml and harness.json symlinks to root-owned files: harness up
// refuses the directory and the files stay as they were.
func TestUpDoesNotWriteThroughAnotherUsersSymlinks(t *testing.T) {
	u := localuser.New(t)
	victims := t.TempDir() // root's, 0700
	var targets []string
	for _, name := range []string{"shadow-like", "config-like"} {
		p := filepath.Join(victims, name)
		if err := os.WriteFile(p, []byte("root's "+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, p)
	}
	dir := localuser.TempDir(t, "plugsim-node")
	u.Shell(t, "mkdir "+dir+" && ln -s "+targets[0]+" "+dir+"/crictl.yaml && ln -s "+targets[1]+" "+dir+"/harness.json")
	wantRefusal(t, cmdUp([]string{"--dir", dir, "--follow=false"}), dir, u)
	for i, p := range targets {
		if b, _ := os.ReadFile(p); string(b) != "root's "+[]string{"shadow-like", "config-like"}[i]+"\n" {
			t.Errorf("%s was changed through the symlink: %q", p, b)
		}
	}
}

// Issue 24, 1: a harness.json naming another process's pid and start time. In the other user's
// directory, `harness down` refuses the directory; in root's own (a stale or edited file), it checks
// that the pid is still the node's (the same start time, working in the node's directory) and does not
// signal a process that is not. The process lives on either way.
func TestDownSignalsOnlyTheNodeItStarted(t *testing.T) {
	u := localuser.New(t)
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	start, err := hostproc.Start(victim.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	state, _ := json.Marshal(wiring.State{PID: victim.Process.Pid, Start: start})

	dir := localuser.TempDir(t, "plugsim-node")
	u.Shell(t, "mkdir "+dir+" && cat > "+dir+"/harness.json <<'EOF'\n"+string(state)+"\nEOF")
	_, err = wiring.ReadState(dir)
	wantRefusal(t, err, dir, u)
	wantRefusal(t, cmdDown([]string{"--dir", dir}), dir, u)

	own := t.TempDir()
	if err := os.WriteFile(filepath.Join(own, wiring.StateFile), state, 0o600); err != nil {
		t.Fatal(err)
	}
	err = cmdDown([]string{"--dir", own})
	if err == nil || !strings.Contains(err.Error(), "not the node's") || !strings.Contains(err.Error(), "works in") {
		t.Errorf("harness down on a state naming another process: %v, want a refusal saying it is not the node's", err)
	}
	if s, err := hostproc.Start(victim.Process.Pid); err != nil || s != start {
		t.Fatalf("the process the state file named is gone (%v): harness down signalled it", err)
	}
}
