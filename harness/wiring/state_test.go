package wiring

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/plugsim/plugsim/harness/scenario"
)

// What a node writes replaces a symlink found in its place instead of writing through it (issue 24:
// crictl.yaml and harness.json made symlinks to root-owned files), and its trace files, which hold
// what crossed each interface (a container's environment among it), are its owner's only.
func TestNodeStateIsWrittenWithoutFollowingSymlinksAndTracesAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	victims := t.TempDir()
	for _, name := range []string{"crictl.yaml", StateFile} {
		target := filepath.Join(victims, name)
		if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	n := Start(t, Options{Dir: dir, Admin: true})
	if err := n.WriteState(); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse([]byte(podScenario), "wired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res := scenario.Run(context.Background(), sc, n.Env()); !res.Passed {
		t.Fatalf("the pod scenario failed: %+v", res)
	}
	for _, name := range []string{"crictl.yaml", StateFile} {
		if b, _ := os.ReadFile(filepath.Join(victims, name)); string(b) != "keep\n" {
			t.Errorf("%s was written through the symlink: %q", name, b)
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want a regular file of mode 0600", name, fi.Mode(), err)
		}
	}
	if _, err := ReadState(dir); err != nil {
		t.Errorf("ReadState of the node's own directory: %v", err)
	}
	for _, name := range []string{"cri.jsonl", "csi.jsonl", "cni.jsonl"} {
		fi, err := os.Stat(filepath.Join(dir, "var/log/plugsim", name))
		if err != nil {
			t.Errorf("trace %s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("trace %s has mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
}
