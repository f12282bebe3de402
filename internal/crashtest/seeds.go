package crashtest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Seeds reads a corpus of hostile inputs kept as one Go-quoted string a line (so an input may
// hold newlines and NULs); blank lines and lines starting with # are skipped. The shell's corpus
// (cri-fake/process/testdata/hostile-commands.txt) seeds both the whole-command fuzz target of
// cri-fake/process and the parser's of cri-fake/process/shell.
func Seeds(tb testing.TB, path string) []string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("seed corpus: %v", err)
	}
	defer f.Close()
	var seeds []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			tb.Fatalf("%s:%d: not a Go-quoted string: %v", path, n, err)
		}
		seeds = append(seeds, s)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("seed corpus %s: %v", path, err)
	}
	if len(seeds) == 0 {
		tb.Fatalf("seed corpus %s is empty", path)
	}
	return seeds
}
