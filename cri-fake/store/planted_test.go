package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/internal/victimtest"
)

// TestPlantedSymlinksInStateDir: a kind directory (sandboxes/, containers/) or a record under the
// state directory that is a symlink out of it (planted by anyone who can write the state
// directory) makes the save, delete or load fail with an error naming it, and nothing outside is
// created, removed or read back; a state directory without one works.
func TestPlantedSymlinksInStateDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plant   func(state, victim string)
		refused []string // the calls that must fail
		names   string   // what their errors name
	}{
		{"sandboxes/ to a directory outside", func(state, victim string) {
			os.Symlink(victim, filepath.Join(state, "sandboxes"))
		}, []string{"SaveSandbox", "DeleteSandbox", "Load"}, "sandboxes"},
		{"containers/ to a directory outside", func(state, victim string) {
			os.Symlink(victim, filepath.Join(state, "containers"))
		}, []string{"SaveContainer", "DeleteContainer", "Load"}, "containers"},
		{"containers/ by a relative link", func(state, victim string) {
			os.Symlink("../victim", filepath.Join(state, "containers"))
		}, []string{"SaveContainer", "DeleteContainer", "Load"}, "containers"},
		{"a record to a file outside", func(state, victim string) {
			os.MkdirAll(filepath.Join(state, "sandboxes"), 0o700)
			os.Symlink(filepath.Join(victim, "s0.json"), filepath.Join(state, "sandboxes", "planted.json"))
		}, []string{"Load"}, "planted.json"},
		{"images.json to a file outside", func(state, victim string) {
			os.Symlink(filepath.Join(victim, "images.json"), filepath.Join(state, "images.json"))
		}, []string{"Load"}, "images.json"},
		{"nothing planted", func(string, string) {}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			state, victim := filepath.Join(root, "state"), filepath.Join(root, "victim")
			os.MkdirAll(state, 0o700)
			os.MkdirAll(victim, 0o755)
			// A valid record, so a load that followed a link would succeed and read it back, and
			// a delete that followed one would remove it.
			cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}
			if err := writeAtomic(filepath.Join(victim, "s0.json"), []byte(`{"id":"s0","name":"victim","config":{}}`)); err != nil {
				t.Fatal(err)
			}
			if err := writeAtomic(filepath.Join(victim, "images.json"), []byte(`[{"id":"sha256:victim"}]`)); err != nil {
				t.Fatal(err)
			}
			tc.plant(state, victim)
			before := victimtest.Tree(t, victim)
			fs := FileState{Dir: state}
			sb := &Sandbox{ID: "s1", Name: "p_ns_u_0", Config: PackSandbox(cfg)}
			c := NewContainer(ContainerSpec{ID: "s0", Name: "c_p_ns_u_0", SandboxID: "s1", Config: Pack(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}})})
			errs := map[string]error{
				"SaveSandbox":   fs.SaveSandbox(sb),
				"SaveContainer": fs.SaveContainer(c),
			}
			_, errs["Load"] = fs.Load()
			errs["DeleteSandbox"] = fs.DeleteSandbox("s1")
			errs["DeleteContainer"] = fs.DeleteContainer("s0") // s0.json is the victim's name too
			for call, err := range errs {
				refusing := slices.Contains(tc.refused, call)
				switch {
				case refusing && (err == nil || !strings.Contains(err.Error(), tc.names)):
					t.Errorf("%s: %v, want an error naming %s", call, err, tc.names)
				case !refusing && err != nil:
					t.Errorf("%s: %v", call, err)
				}
			}
			if now := victimtest.Tree(t, victim); now != before {
				t.Fatalf("the victim beside the state directory changed:\nbefore:\n%s\nafter:\n%s", before, now)
			}
		})
	}
}
