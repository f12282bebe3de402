package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/internal/localuser"
)

// victims starts a process and makes a network namespace that a planted state file will name; the
// test fails if either is gone when it ends.
func victims(t *testing.T) (Process, string) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip (iproute2): the test makes a network namespace a state file names")
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	start, err := procStart(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := "plugsim-victim-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	p := Process{Name: "node1-kubelet", PID: sleep.Process.Pid, Start: start}
	t.Cleanup(func() {
		if s, err := procStart(p.PID); err != nil || s != p.Start {
			t.Errorf("the process the state file named (pid %d) was stopped", p.PID)
		}
		if _, err := os.Stat(nsPath(ns)); err != nil {
			t.Errorf("the network namespace the state file named, %s, was deleted", ns)
		}
	})
	return p, ns
}

// Issue 24, 1: another user writes cluster.json naming another process's pid and start time and any
// network namespace. In the user's directory, root's `cluster down` and `cluster up` (which tears down
// first) refuse the directory, naming the user and the mode; in root's own (a stale or edited file),
// `down` signals only processes that are still the cluster's (working in its directory) and deletes
// only namespaces named for that directory. Either way the process and the namespace live on.
func TestDownActsOnlyOnWhatIsTheClusters(t *testing.T) {
	u := localuser.New(t)
	p, ns := victims(t)
	st, _ := json.Marshal(State{Prefix: "plugsim-victim", Netns: []string{ns}, Procs: []Process{p}})

	dir := localuser.TempDir(t, "plugsim-cluster")
	u.Shell(t, "mkdir "+dir+" && touch "+dir+"/"+markerFile+" && cat > "+dir+"/"+StateFile+" <<'EOF'\n"+string(st)+"\nEOF")
	for name, err := range map[string]error{
		"down": Down(dir, os.Stdout),
		"up":   Up(Options{Dir: dir, Nodes: 1, BinDir: t.TempDir()}),
	} {
		if err == nil || !strings.Contains(err.Error(), "refusing state directory "+dir) || !strings.Contains(err.Error(), u.Name) || !strings.Contains(err.Error(), "mode d") {
			t.Errorf("cluster %s on the other user's directory: %v, want a refusal naming %s and the mode", name, err, u.Name)
		}
	}

	own := t.TempDir()
	if err := os.WriteFile(filepath.Join(own, StateFile), st, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Down(own, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not stopping node1-kubelet: pid", "works in", "not deleting network namespace " + ns} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("down's output lacks %q:\n%s", want, out.String())
		}
	}
}
