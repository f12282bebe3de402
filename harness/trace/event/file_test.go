package event

import (
	"os"
	"path/filepath"
	"testing"
)

// Trace files are their owner's only, a wider one written by an older plugsim is narrowed, and a
// symlink planted where a trace file goes is not appended through (issue 24, 3).
func TestTraceFilesAreOwnerOnlyAndNeverFollowASymlink(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "cni.jsonl")
	if err := AppendFile(fresh, Event{Interface: CNI, Method: "ADD", Code: "OK"}); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "cri.jsonl")
	os.WriteFile(old, nil, 0o644)
	os.Chmod(old, 0o644)
	if err := AppendFile(old, Event{Interface: CRI, Method: "Version", Code: "OK"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fresh, old} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	link := filepath.Join(dir, "csi.jsonl")
	os.Symlink(victim, link)
	if err := AppendFile(link, Event{Interface: CSI, Method: "Probe", Code: "OK"}); err == nil {
		t.Error("appended through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}
