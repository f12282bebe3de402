package process

import (
	"slices"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/cri-fake/process/applets"
	"github.com/plugsim/plugsim/cri-fake/process/shell"
)

// TestAppletTableDrivesEverything: every list of applet names comes from the
// one table: Applets, the busybox image's /bin, what `busybox` prints, the
// shell's inline set (`type` calls those builtins) and the executables an
// image behaviour may name.
func TestAppletTableDrivesEverything(t *testing.T) {
	var names, busybox, inline []string
	for _, r := range applets.Rows() {
		names = append(names, r.Name)
		if r.Busybox {
			busybox = append(busybox, r.Name)
		}
		if r.Inline {
			inline = append(inline, r.Name)
		}
	}
	if sorted := slices.Sorted(slices.Values(names)); len(slices.Compact(sorted)) != len(names) {
		t.Fatalf("a name appears twice in the table: %v", names)
	}

	if got := slices.Sorted(slices.Values(Applets())); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Errorf("Applets() = %v, want the table's names %v", got, names)
	}

	var bin []string
	for _, p := range BaseLayer("busybox").Paths() {
		if name, ok := strings.CutPrefix(p, "/bin/"); ok && name != "busybox" {
			bin = append(bin, name)
		}
	}
	if want := slices.Sorted(slices.Values(busybox)); !slices.Equal(bin, want) {
		t.Errorf("busybox image /bin = %v, want the table's busybox rows %v", bin, want)
	}

	out, _, code := sh(t, nil, "busybox")
	if want := "\t" + strings.Join(busybox, ", ") + "\n"; code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("busybox printed %q (code %d), want it to end with %q", out, code, want)
	}

	for _, r := range applets.Rows() {
		out, _, _ := sh(t, nil, "type "+r.Name)
		shellBuiltin := shell.Builtin(r.Name)
		if builtin := strings.Contains(out, "shell builtin"); builtin != (r.Inline || shellBuiltin) {
			t.Errorf("type %s = %q; inline in the table: %v", r.Name, out, r.Inline)
		}
		if _, err := ImageLayer(ImageConfig{Behavior: []byte(`{"executables": {"/usr/bin/x": "` + r.Name + `"}}`)}); err != nil {
			t.Errorf("image behaviour executable %q: %v", r.Name, err)
		}
	}
	if _, err := ImageLayer(ImageConfig{Behavior: []byte(`{"executables": {"/usr/bin/x": "nosuchapplet"}}`)}); err == nil {
		t.Error("an image behaviour naming an applet the table lacks was accepted")
	}
	if len(inline) == 0 {
		t.Error("no inline applet in the table")
	}
}
