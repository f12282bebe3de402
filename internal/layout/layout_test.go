// Package layout holds a test of the module's shape: no package so large that it stops having one
// concern (issue 15's bound: 4,000 lines of non-test Go in one package).
package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const maxPackageLines = 4000

func TestNoPackageOverTheLineBound(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root %s: %v", root, err)
	}
	lines := map[string]int{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own (the pinned tools)
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines[filepath.Dir(p)] += bytes.Count(b, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 10 {
		t.Fatalf("found %d packages under %s; the walk is not seeing the module", len(lines), root)
	}
	for dir, n := range lines {
		if n > maxPackageLines {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("%s: %d lines of non-test Go, over %d: split it by concern", rel, n, maxPackageLines)
		}
	}
}
