// Package testbin finds the binaries the end-to-end suites run: plugsim's own (`make build`) and
// the pinned real clients (`make tools`, `make kubelet`), all in $PLUGSIM_BIN, which the Makefile
// sets to bin/. A suite run without them fails rather than skips: a suite that silently tests
// nothing is worse than a red one.
package testbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns $PLUGSIM_BIN after checking that every named binary is there and executable; it
// fails the test, naming the make target to run, when one is not.
func Dir(tb testing.TB, names ...string) string {
	tb.Helper()
	dir := os.Getenv("PLUGSIM_BIN")
	if dir == "" {
		tb.Fatalf("PLUGSIM_BIN is not set: run this suite through its make target (make e2e-...), which builds %s into bin/", strings.Join(names, ", "))
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&0o111 == 0 {
			tb.Fatalf("%s is missing or not executable: run `make build tools` (and `make kubelet` for the kubelet)", p)
		}
	}
	return dir
}

// Path returns $PLUGSIM_BIN/name, failing the test when it is missing.
func Path(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(Dir(tb, name), name)
}
