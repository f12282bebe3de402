package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: a scenario file parses or is refused with an *Error naming the file (and a line
// when YAML gave one), never panics.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "scenarios", "*.yaml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("name: x\nsteps:\n- call: Version\n  interface: cri\n  expect: {code: OK}\n"))
	f.Add([]byte("steps: [{call: X, repeat: -1}]\n"))
	f.Add([]byte("&a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data, "s.yaml")
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.File != "s.yaml" {
				t.Fatalf("error %v (%T) does not name the file", err, err)
			}
			return
		}
		for _, st := range sc.Steps {
			_ = st.Title()
		}
	})
}
