package layout

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The top-level README is a newcomer's page (issue 30): what plugsim is, the two commands, one path per
// kind of user and the headline figures, each linking to the component README that holds the detail.
// Everything else belongs in a component's README, so the page stays within one short read.
const maxTopReadmeLines = 150

func TestTopReadmeStaysShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > maxTopReadmeLines {
		t.Errorf("README.md has %d lines, over %d: move the detail into the README of the component it describes", n, maxTopReadmeLines)
	}
	for _, cmd := range []string{"make demo", "make test", "make cluster"} {
		if !strings.Contains(string(b), cmd) {
			t.Errorf("README.md no longer names %q, which a fresh clone starts from", cmd)
		}
	}
}
